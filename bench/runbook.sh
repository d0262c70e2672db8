#!/usr/bin/env bash
# Take over the lab's platform at DR by hand: the runbook an on-call engineer
# would follow without drills, one command after the other with kubectl, the
# aws CLI and curl. It does the same takeover as `drills run --mode incident`;
# bench/runbook.py times the two side by side.
#
# Like most runbooks it trusts what it was told: the workload list is written
# out below, nothing is checked before the first change, and a failed command
# stops it where it is, with nothing to undo the steps before.
#
# Input (environment):
#   LAB          the lab's state directory (kubeconfigs, aws/ credential files)
#   MOTO_URL     the AWS endpoint (moto) serving Route 53
#   ZONE_ID      the Route 53 hosted zone of drills.test.
#   PRIMARY_URL  the primary site's endpoint; DR_URL the DR site's
#   KUBE_CACHE   kubectl's cache directory (default: $HOME/.kube/cache)
set -euo pipefail

: "${LAB:?}" "${MOTO_URL:?}" "${ZONE_ID:?}" "${PRIMARY_URL:?}" "${DR_URL:?}"
KUBE_CACHE=${KUBE_CACHE:-$HOME/.kube/cache}
RECORD=api.drills.test.
DR_ADDRESS=127.0.0.3
TTL=30
ROLLOUT_TIMEOUT=600s

AWS_ACCESS_KEY_ID=$(<"$LAB/aws/access_key_id")
AWS_SECRET_ACCESS_KEY=$(<"$LAB/aws/secret_access_key")
export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_DEFAULT_REGION=us-east-1

# Every command goes to stderr as it runs ("+ ..."), for the record of what was done.
run() { printf '+ %s\n' "$*" >&2; "$@"; }
primary() { run kubectl --kubeconfig "$LAB/primary.kubeconfig" --context primary --cache-dir "$KUBE_CACHE" "$@"; }
dr() { run kubectl --kubeconfig "$LAB/dr.kubeconfig" --context dr --cache-dir "$KUBE_CACHE" "$@"; }
r53() { run aws --endpoint-url "$MOTO_URL" route53 "$@"; }
step() { printf '%s  %s\n' "$(date +%T.%3N)" "$*"; }

# Poll URL once a second until its HTTP status is (want=200) or is not (want=!200) 200.
wait_http() {
  local url=$1 want=$2 code
  for _ in $(seq 60); do
    code=$(run curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" || true)
    if [[ $want == 200 && $code == 200 ]] || [[ $want == '!200' && $code != 200 ]]; then
      echo "$url answered $code"
      return 0
    fi
    sleep 1
  done
  echo "$url still answers $code" >&2
  return 1
}

# Scale each "namespace kind name replicas" line at DR, then wait for its rollout.
bring_up() {
  local ns kind name replicas
  while read -r ns kind name replicas; do
    dr -n "$ns" scale "$kind/$name" --replicas="$replicas"
    dr -n "$ns" rollout status "$kind/$name" --timeout="$ROLLOUT_TIMEOUT"
  done
}

step "1. close the primary ingress"
primary -n serving patch ingress public --type=merge \
  -p '{"spec":{"ingressClassName":"drills-fenced"}}'

step "2. stop the primary writers"
primary -n serving scale statefulset/session-store --replicas=0
primary -n training scale deployment/trainer --replicas=0
primary -n platform scale deployment/model-registry --replicas=0
primary -n batch scale deployment/dataset-compactor --replicas=0

step "3. check the primary no longer serves"
wait_http "$PRIMARY_URL" '!200'

step "4. bring up the critical tier at DR, one workload at a time"
bring_up <<'EOF'
serving deployment inference-gateway 2
serving deployment llm-server 2
serving deployment embedding-server 1
serving statefulset session-store 1
EOF

step "5. bring up the normal tier at DR"
bring_up <<'EOF'
training deployment trainer 1
training deployment data-loader 1
platform deployment model-registry 1
platform deployment metrics-gateway 1
EOF

step "6. switch DNS to DR and wait for Route 53 to apply it"
change=$(r53 change-resource-record-sets --hosted-zone-id "$ZONE_ID" \
  --query ChangeInfo.Id --output text --change-batch "$(cat <<EOF
{"Changes": [{"Action": "UPSERT", "ResourceRecordSet": {
  "Name": "$RECORD", "Type": "A", "TTL": $TTL,
  "ResourceRecords": [{"Value": "$DR_ADDRESS"}]}}]}
EOF
)")
r53 wait resource-record-sets-changed --id "$change"
echo "change $change is INSYNC"

step "7. check DR serves"
wait_http "$DR_URL" 200

step "done"
