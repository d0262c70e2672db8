#!/usr/bin/env bash
# Installs the Debian packages the tests and the full lab need, only when one is missing.
# Without root it only reports what is missing: the lab then falls back to moto
# (Route 53 and ECR) and the tests that need the binaries fail under CI=true.
set -euo pipefail

# binary -> Debian package
declare -A wanted=(
  [named]=bind9
  [tsig-keygen]=bind9-utils
  [dig]=bind9-dnsutils
  [docker-registry]=docker-registry
  [skopeo]=skopeo
  [chromium]=chromium
  [pdftotext]=poppler-utils
  [rclone]=rclone
  [kubectl]=kubernetes-client
  [promtool]=prometheus
  [prometheus-alertmanager]=prometheus-alertmanager
  # npm installs package.json: loadtest, the load probe's generator, and Azurite for the Azure
  # Blob tests; hey is the second, independent generator bench/load_probe.py compares with.
  [node]=nodejs
  [npm]=npm
  [hey]=hey
)

missing=()
for bin in "${!wanted[@]}"; do
  if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then
    missing+=("${wanted[$bin]}")
  fi
done

# PostgreSQL's server binaries (initdb, pg_ctl) live off PATH, one directory a version.
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  missing+=(postgresql)
fi

# The venv is made from the system's Python when it is 3.11 or later (Makefile: PYTHON);
# Debian ships venv's ensurepip apart, in python3-venv.
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  && ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  missing+=(python3-venv)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "sysdeps: missing Debian packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
  exit 0
fi

echo "sysdeps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian registry and Prometheus packages start system services we do not want listening
# (the tests start their own, on free ports).
if command -v systemctl >/dev/null 2>&1; then
  for service in docker-registry prometheus prometheus-alertmanager postgresql; do
    systemctl disable --now "$service" >/dev/null 2>&1 || true
  done
fi
