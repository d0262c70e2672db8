"""Hostile and mistaken plans (tracker issue 11): each class of attack, several members each.

- YAML tags that turn text into something the credential guard cannot read;
- credentials in URLs (user info, query parameters), in URL fields and in free text;
- aliases that multiply the work of every later step;
- control characters that drive the terminal;
- file references that hang (FIFOs), never end (/dev/zero) or are not files;
- kubeconfigs of the wrong shape, and `prefect:` references with no server.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from drills.cli.app import app
from drills.cli.plan_cmd import register
from drills.errors import PlanError, PlanProblem, TargetError
from drills.plan import SecretRef, load_plan, plan_from_text
from drills.plan.files import FileRefusedError, read_regular_file
from drills.plan.kubeconfig import KubeconfigError, load_kubeconfig
from drills.plan.refs import MAX_SECRET_FILE_BYTES, resolve_secret
from tests.plan.test_plan import SOURCE, VALID, altered, position, problems_of

register(app)
runner = CliRunner()

DESCRIPTION = 'description: "A small plan for tests"'
DR_REGISTRY = "url: http://127.0.0.1:5002"


def only_problem(text: str) -> PlanProblem:
    problems = problems_of(text)
    assert len(problems) == 1, problems
    return problems[0]


# --- tags ------------------------------------------------------------------------------

SECRET_URL = "http://admin:Hunter2Secret@127.0.0.3:55389"
B64_URL = base64.b64encode(SECRET_URL.encode()).decode()
B64_KEY = base64.b64encode(b"AKIAIOSFODNN7EXAMPLE").decode()

TAGGED = {
    "binary url": (f"!!binary {B64_URL}", "!!binary"),
    "binary key id": (f"!!binary {B64_KEY}", "!!binary"),
    "set": ("!!set {a, b}", "!!set"),
    "omap": ("!!omap [{a: 1}]", "!!omap"),
    "pairs": ("!!pairs [{a: 1}]", "!!pairs"),
    "python object": ("!!python/object:os.system x", "!!python/object:os.system"),
    "python name": ("!!python/name:os.system ''", "!!python/name:os.system"),
    "custom": ("!vault x", "!vault"),
    "verbatim": ("!<tag:example.com,2000:secret> x", "tag:example.com,2000:secret"),
    "timestamp": ("!!timestamp 2024-01-01", "!!timestamp"),
}


@pytest.mark.parametrize(("value", "tag"), TAGGED.values(), ids=list(TAGGED))
@pytest.mark.parametrize(
    ("old", "path"),
    [(DESCRIPTION, "description"), (DR_REGISTRY, "sites.dr.registry.url")],
    ids=["description", "url"],
)
def test_every_non_plain_tag_is_refused_at_its_value(
    value: str, tag: str, old: str, path: str
) -> None:
    key = old.split(":")[0]
    text = altered(old, f"{key}: {value}")
    found = only_problem(text)
    line, column = position(text, value)
    assert (found.line, found.column, found.path) == (line, column, path)
    assert f"the YAML tag `{tag}` is not allowed in a plan" in found.message
    assert "Hunter2Secret" not in str(found) and B64_URL not in str(found)


def test_a_tag_on_a_key_is_refused_too() -> None:
    text = altered(DESCRIPTION, f"!!binary {B64_KEY}: x\n{DESCRIPTION}")
    found = only_problem(text)
    assert "`!!binary` is not allowed" in found.message and found.line == 3


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("dr_replicas: 2\n", 'dr_replicas: !!int "2"\n'),
        (DESCRIPTION, "description: !!str 2024-01-01"),
        ("writer: true", "writer: !!bool true"),
        ("rpo: 5m}", "rpo: !!float 300}"),
    ],
)
def test_plain_tags_still_work(old: str, new: str) -> None:
    plan_from_text(altered(old, new), SOURCE)


def test_a_date_is_text_not_a_timestamp() -> None:
    plan = plan_from_text(altered(DESCRIPTION, "description: 2024-01-01"), SOURCE)
    assert plan.description == "2024-01-01"


# --- credentials in URLs ------------------------------------------------------------------

URL_FIELDS = {
    "registry url": (DR_REGISTRY, "sites.dr.registry.url", "http://127.0.0.1:5002"),
    "objects endpoint": (
        "      endpoint_url: http://127.0.0.1:5000\n      region: us-east-1\n    ingress:\n"
        "      mode: controller",
        "sites.dr.objects.endpoint_url",
        "http://127.0.0.1:5000",
    ),
    "site endpoint": (
        "endpoint: http://127.0.0.3:18080/healthz",
        "sites.dr.endpoint",
        "http://127.0.0.3:18080/healthz",
    ),
    "smoke url": (
        "url: http://api.drills.test:18080/healthz",
        "smoke[0].url",
        "http://api.drills.test:18080/healthz",
    ),
}

# (how a credential rides in a URL, the credential, a word the message must use)
URL_CREDENTIALS = {
    "user:password@": ("http://admin:Hunter2Secret@{hostpath}", "Hunter2Secret", "password"),
    "password with /": ("http://admin:Hunt/er2x@{hostpath}", "Hunt/er2x", "password"),
    "numeric password with /": ("http://admin:12/Hunter2@{hostpath}", "12/Hunter2", "password"),
    "password with @": ("http://admin:Hun@ter2x@{hostpath}", "Hun@ter2x", "password"),
    "user only": ("http://Hunter2user@{hostpath}", "Hunter2user", "user info"),
    "access_token": ("http://{hostpath}?access_token=Hunter2tok", "Hunter2tok", "access_token"),
    "X-Amz-Signature": ("http://{hostpath}?X-Amz-Signature=Hunter2sig", "Hunter2sig", "X-Amz"),
    "X-Amz-Credential": ("http://{hostpath}?a=1&X-Amz-Credential=Hunter2c", "Hunter2c", "X-Amz"),
    "X-Goog-Signature": ("http://{hostpath}?X-Goog-Signature=Hunter2g", "Hunter2g", "X-Goog"),
    "sig": ("http://{hostpath}?sv=1&sig=Hunter2sas", "Hunter2sas", "sig"),
    "token": ("http://{hostpath}?token=Hunter2t", "Hunter2t", "token"),
    "api_key": ("http://{hostpath}?api_key=Hunter2k", "Hunter2k", "api_key"),
    "apikey": ("http://{hostpath}?apikey=Hunter2k", "Hunter2k", "apikey"),
    "key": ("http://{hostpath}?key=Hunter2k", "Hunter2k", "key"),
    "password param": ("http://{hostpath}?password=Hunter2p", "Hunter2p", "password"),
    "secret": ("http://{hostpath}?secret=Hunter2s", "Hunter2s", "secret"),
    "client_secret": ("http://{hostpath}?client_secret=Hunter2s", "Hunter2s", "client_secret"),
    "auth": ("http://{hostpath}?auth=Hunter2a", "Hunter2a", "auth"),
    "fragment token": ("http://{hostpath}#access_token=Hunter2f", "Hunter2f", "access_token"),
    "AWSAccessKeyId": ("http://{hostpath}?AWSAccessKeyId=Hunter2id", "Hunter2id", "AWSAccessKey"),
    # One lowercase word, and the short names: the same list as redact_url's.
    **{
        name: (f"http://{{hostpath}}?page=2&{name}=Hunter2x", "Hunter2x", name)
        for name in (
            "accesstoken",
            "apitoken",
            "authtoken",
            "sessiontoken",
            "privatekey",
            "clientsecret",
            "pass",
            "pw",
            "passwd",
        )
    },
}


@pytest.mark.parametrize(("form", "secret", "word"), URL_CREDENTIALS.values(), ids=URL_CREDENTIALS)
@pytest.mark.parametrize(("old", "path", "url"), URL_FIELDS.values(), ids=list(URL_FIELDS))
def test_credentials_in_every_url_field_are_refused(
    form: str, secret: str, word: str, old: str, path: str, url: str
) -> None:
    hostpath = url.removeprefix("http://")
    text = altered(old, old.replace(url, form.format(hostpath=hostpath)))
    found = only_problem(text)
    assert found.path == path
    assert word in found.message
    assert secret not in str(found)


# A user name alone, in prose, is not a credential; in a URL field it is still refused.
IN_PROSE = {k: v for k, v in URL_CREDENTIALS.items() if k != "user only"}


@pytest.mark.parametrize(("form", "secret", "word"), IN_PROSE.values(), ids=IN_PROSE)
def test_credentials_in_urls_in_free_text_are_refused(form: str, secret: str, word: str) -> None:
    url = form.format(hostpath="wiki.example.com/runbook")
    text = altered(DESCRIPTION, f'description: "runbook: {url} (ask ops)"')
    found = only_problem(text)
    assert found.path == "description"
    assert "URL" in found.message and secret not in str(found)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.3:18080/healthz?site=dr",
        "http://127.0.0.3:18080/healthz?model=llama&page=2",
        "http://127.0.0.3:18080/healthz?region=eu&timeout=5&keyword=gpu&monkey=1&bypass=1",
        "http://127.0.0.3:18080/healthz?sig=",  # a name with no value carries nothing
        "http://127.0.0.3:18080/health%40z",
    ],
)
def test_urls_without_credentials_are_accepted(url: str) -> None:
    plan = plan_from_text(
        altered("endpoint: http://127.0.0.3:18080/healthz", f"endpoint: {url}"), SOURCE
    )
    assert plan.sites.dr.endpoint == url


def test_the_issue_example_never_reaches_the_plan_or_its_output(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(altered(DR_REGISTRY, f"url: !!binary {B64_URL}"), encoding="utf-8")
    for command in ("validate", "show"):
        result = runner.invoke(app, ["plan", command, str(path)])
        assert result.exit_code == 2
        assert "Hunter2Secret" not in result.output and "Traceback" not in result.output


# --- aliases ------------------------------------------------------------------------------


def timed_problems(text: str, budget: float = 1.0) -> list[PlanProblem]:
    started = time.monotonic()
    problems = problems_of(text)
    assert time.monotonic() - started < budget
    return problems


ALIAS_SHAPES = {
    "1 MB string x 10,000": f"big: &b {'x' * 1_000_000}\nrefs: ["
    + ", ".join(["*b"] * 10_000)
    + "]",
    "200 kB string x 10": f"big: &b {'y' * 200_000}\nrefs: [" + ", ".join(["*b"] * 10) + "]",
    "list of 1,000 x 200": "a: &a ["
    + ", ".join(["v"] * 1000)
    + "]\nb: ["
    + ", ".join(["*a"] * 200)
    + "]",
    "nested laughs": "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "\n".join(
        f"{n}: &{n} [" + ", ".join([f"*{p}"] * 10) + "]"
        for p, n in zip("abcdef", "bcdefg", strict=True)
    ),
    "merge keys": "a: &a {"
    + ", ".join(f"k{i}: {'z' * 200}" for i in range(100))
    + "}\n"
    + "\n".join(f"m{i}: {{<<: *a}}" for i in range(100)),
}


@pytest.mark.parametrize("text", ALIAS_SHAPES.values(), ids=list(ALIAS_SHAPES))
def test_alias_expansion_is_refused_fast_and_says_which_limit(text: str) -> None:
    problems = timed_problems(text)
    assert len(problems) == 1
    message = problems[0].message
    assert message.startswith("aliases (*name) expand this file by more than ")
    assert "values" in message or "MiB of text" in message
    assert problems[0].line is not None


def test_a_few_aliases_of_a_shared_section_are_fine() -> None:
    objects = "    objects:\n      endpoint_url: http://127.0.0.1:5000\n      region: us-east-1\n"
    text = VALID.replace(objects, "    objects: &objects\n" + objects[13:], 1)
    text = text.replace(objects, "    objects: *objects\n", 1)
    assert text.count("*objects") == 1
    plan = plan_from_text(text, SOURCE)
    assert plan.sites.dr.objects == plan.sites.primary.objects


def test_a_plan_with_15000_workloads_is_accepted() -> None:
    many = "".join(
        f"  - name: w{i}\n    namespace: serving\n    kind: Deployment\n"
        "    tier: normal\n    dr_replicas: 1\n"
        for i in range(15_000)
    )
    plan = plan_from_text(altered("workloads:\n", "workloads:\n" + many), SOURCE)
    assert len(plan.workloads) == 15_002


# --- control characters -------------------------------------------------------------------

CONTROL_FIELDS = {
    "description": (DESCRIPTION, 'description: "A small{c}plan"', "description"),
    "context": ("context: dr\n", 'context: "d{c}r"\n', "sites.dr.kubernetes.context"),
    "smoke name": ("- name: gateway", '- name: "gate{c}way"', "smoke[0].name"),
    "expect_body": ("expect_body: ok", 'expect_body: "o{c}k"', "smoke[0].expect_body"),
    "kubeconfig": ("kubeconfig: dr.kubeconfig", 'kubeconfig: "d{c}r.kubeconfig"', None),
    "prefix": ("prefix: runs/", 'prefix: "ru{c}ns/"', "datasets[0].prefix"),
}
CONTROL_CHARS = {
    "ESC": ("\\e", "\\x1b"),
    "BEL": ("\\a", "\\x07"),
    "NUL": ("\\0", "\\x00"),
    "CR": ("\\r", "\\x0d"),
    "DEL": ("\\x7f", "\\x7f"),
    "CSI (C1)": ("\\x9b", "\\x9b"),
    "RLO": ("\\u202e", "\\u202e"),
    "line separator": ("\\u2028", "\\u2028"),
}


@pytest.mark.parametrize(("escape", "shown"), CONTROL_CHARS.values(), ids=list(CONTROL_CHARS))
@pytest.mark.parametrize(("old", "new", "path"), CONTROL_FIELDS.values(), ids=list(CONTROL_FIELDS))
def test_control_characters_are_refused_and_shown_escaped(
    escape: str, shown: str, old: str, new: str, path: str | None
) -> None:
    text = altered(old, new.format(c=escape))
    found = only_problem(text)
    assert found.path == (path or "sites.dr.kubernetes.kubeconfig")
    assert shown in found.message
    raw = escape.encode().decode("unicode_escape") if escape != "\\e" else "\x1b"
    assert raw not in str(found)


def test_newlines_and_tabs_are_fine_in_the_description() -> None:
    plan = plan_from_text(altered(DESCRIPTION, 'description: "one\\n\\ttwo"'), SOURCE)
    assert plan.description == "one\n\ttwo"


def test_an_esc_sequence_in_a_key_is_reported_escaped_by_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(
        altered("    dr_replicas: 2\n", '    dr_replicas: 2\n    "\\e[2J\\e[32mok": 1\n'),
        encoding="utf-8",
    )
    result = runner.invoke(app, ["plan", "validate", str(path)])
    assert result.exit_code == 2
    assert "\x1b" not in result.output
    assert "workloads[0].\\x1b[2J\\x1b[32mok: unknown field `\\x1b[2J\\x1b[32mok`" in result.stderr


def test_show_prints_a_multiline_description_as_lines(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(altered(DESCRIPTION, 'description: "one\\ntwo"'), encoding="utf-8")
    result = runner.invoke(app, ["plan", "show", str(path)])
    assert result.exit_code == 0, result.output
    assert "one\ntwo\n" in result.stdout


# --- files that are not files ----------------------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_fifo_as_secret_file_is_refused_without_blocking(fifo: Path) -> None:
    started = time.monotonic()
    with pytest.raises(TargetError) as info:
        resolve_secret(SecretRef.parse(f"file:{fifo}"), fifo.parent)
    assert time.monotonic() - started < 1
    assert info.value.cause == f"{fifo} is a FIFO (named pipe), not a regular file"


def test_a_fifo_as_the_plan_file_is_refused_without_blocking(fifo: Path) -> None:
    with pytest.raises(PlanError) as info:
        load_plan(fifo)
    assert [p.message for p in info.value.problems] == [
        "this is a FIFO (named pipe), not a regular file; give a plan file"
    ]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/dev/zero", "is a character device, not a regular file"),
        ("/dev/null", "is a character device, not a regular file"),
        ("/", "is a directory, not a regular file"),
    ],
)
def test_special_files_are_refused(path: str, reason: str) -> None:
    with pytest.raises(FileRefusedError) as info:
        read_regular_file(Path(path), 1024)
    assert info.value.reason == reason
    with pytest.raises(TargetError) as target:
        resolve_secret(SecretRef.parse(f"file:{path}"), Path("/"))
    assert target.value.cause == f"{path} {reason}"


def test_a_secret_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * (MAX_SECRET_FILE_BYTES + 1))
    with pytest.raises(TargetError) as info:
        resolve_secret(SecretRef.parse("file:big"), tmp_path)
    assert info.value.cause == f"{big} is larger than 1 MiB"
    big.write_bytes(b"x" * MAX_SECRET_FILE_BYTES)
    assert len(resolve_secret(SecretRef.parse("file:big"), tmp_path)) == MAX_SECRET_FILE_BYTES


def test_a_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("value\n", encoding="utf-8")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert resolve_secret(SecretRef.parse("file:link"), tmp_path) == "value"


@pytest.mark.parametrize(
    ("old", "new", "path", "message"),
    [
        (
            "kubeconfig: dr.kubeconfig",
            'kubeconfig: "a\\0b"',
            "sites.dr.kubernetes.kubeconfig",
            "a file path cannot contain a control character (\\x00 at character 2)",
        ),
        (
            "kubeconfig: dr.kubeconfig",
            'kubeconfig: ""',
            "sites.dr.kubernetes.kubeconfig",
            "must be a file path, not empty",
        ),
        (
            "secret: file:tsig.secret}",
            'secret: "file:a\\0b"}',
            "dns.tsig.secret",
            "file: path contains a control character (such as NUL)",
        ),
    ],
    ids=["NUL in kubeconfig", "empty kubeconfig", "NUL in file reference"],
)
def test_unusable_paths_are_refused_at_validation(
    old: str, new: str, path: str, message: str
) -> None:
    found = only_problem(altered(old, new))
    assert (found.path, found.message) == (path, message)


# --- kubeconfigs ------------------------------------------------------------------------------

GOOD_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: dr, context: {cluster: c, user: u}}]
current-context: dr
"""

BAD_KUBECONFIGS = {
    "contexts is a number": (
        "contexts: 5\n",
        "contexts must be a list of {name, context} entries, got a whole number",
    ),
    "a context that is a number": ("contexts: [5]\n", "contexts[0] must be a mapping"),
    "a context without name": (
        "contexts: [{context: {cluster: c}}]\n",
        "contexts[0] needs a name (a string)",
    ),
    "a context without body": (
        "contexts: [{name: dr}]\n",
        "contexts[0] ('dr') needs a context mapping, got nothing (null)",
    ),
    "clusters is a mapping": (
        "clusters: {c: 1}\ncontexts: [{name: dr, context: {cluster: c}}]\n",
        "clusters must be a list of {name, cluster} entries, got a mapping",
    ),
    "unknown cluster": (
        "contexts: [{name: dr, context: {cluster: nope}}]\n",
        "context 'dr' names no cluster that the file defines",
    ),
    "cluster without server": (
        "clusters: [{name: c, cluster: {}}]\ncontexts: [{name: dr, context: {cluster: c}}]\n",
        "cluster 'c' has no server URL",
    ),
    "server is a number": (
        "clusters: [{name: c, cluster: {server: 5}}]\n"
        "contexts: [{name: dr, context: {cluster: c}}]\n",
        "server must be a string, got a whole number",
    ),
    "token is a list": (
        "clusters: [{name: c, cluster: {server: s}}]\nusers: [{name: u, user: {token: [1]}}]\n"
        "contexts: [{name: dr, context: {cluster: c, user: u}}]\n",
        "token must be a string, got a list",
    ),
    "no such context": (GOOD_KUBECONFIG.replace("name: dr", "name: other"), "no context named"),
    "not a mapping": ("- a\n- b\n", "must be a mapping (clusters, users, contexts...)"),
    "a binary tag": ("contexts: !!binary aGVsbG8=\n", "the YAML tag `!!binary` is not allowed"),
    "an alias bomb": (
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "\n".join(
            f"{n}: &{n} [" + ", ".join([f"*{p}"] * 10) + "]"
            for p, n in zip("abcdefgh", "bcdefghi", strict=True)
        ),
        "aliases (*name) expand this file",
    ),
    "not YAML": ("contexts: [\n", "invalid YAML"),
}


@pytest.mark.parametrize(("content", "message"), BAD_KUBECONFIGS.values(), ids=BAD_KUBECONFIGS)
def test_malformed_kubeconfigs_get_one_clear_sentence(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(KubeconfigError) as info:
        load_kubeconfig(path, "dr")
    assert message in str(info.value)
    assert "t0ken" not in str(info.value)


def test_a_good_kubeconfig_loads(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(GOOD_KUBECONFIG, encoding="utf-8")
    assert load_kubeconfig(path, None)["current-context"] == "dr"
    assert load_kubeconfig(path, "dr")["clusters"][0]["name"] == "c"


def test_special_kubeconfig_files_are_refused(fifo: Path) -> None:
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(KubeconfigError, match="not a regular file"):
            load_kubeconfig(path, "dr")


def test_the_kubernetes_target_uses_the_same_check(tmp_path: Path) -> None:
    from drills.targets.kube.config import site_configuration

    (tmp_path / "dr.kubeconfig").write_text("contexts: 5\n", encoding="utf-8")
    (tmp_path / "plan.yaml").write_text(VALID, encoding="utf-8")
    plan = load_plan(tmp_path / "plan.yaml")
    with pytest.raises(TargetError) as info:
        site_configuration("dr", plan.sites.dr.kubernetes, plan)
    assert "contexts must be a list of {name, context} entries" in info.value.cause


def test_resolve_reports_malformed_kubeconfigs_and_special_files(
    tmp_path: Path, fifo: Path
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(VALID.replace("file:tsig.secret", f"file:{fifo}"), encoding="utf-8")
    (tmp_path / "primary.kubeconfig").write_text("contexts: 5\n", encoding="utf-8")
    (tmp_path / "dr.kubeconfig").write_text(GOOD_KUBECONFIG, encoding="utf-8")
    started = time.monotonic()
    result = runner.invoke(app, ["plan", "validate", str(plan), "--resolve"])
    assert time.monotonic() - started < 5
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    text = plan.read_text(encoding="utf-8")
    secret_at = ":".join(map(str, position(text, f"file:{fifo}")))
    kubeconfig_at = ":".join(map(str, position(text, "primary.kubeconfig")))
    assert lines == [  # each located as the loader's own problems are: file:line:col
        f"✗ {plan}: 2 reference(s) do not resolve",
        f"{plan}:{secret_at}: dns.tsig.secret: file:{fifo} does not resolve: {fifo} is a FIFO "
        "(named pipe), not a regular file",
        f"{plan}:{kubeconfig_at}: sites.primary.kubernetes.kubeconfig: "
        f"{tmp_path / 'primary.kubeconfig'}: "
        "contexts must be a list of {name, context} entries, got a whole number",
    ]


# --- prefect: with no server ------------------------------------------------------------------


@pytest.mark.serial
def test_prefect_reference_without_a_server_fails_fast_in_one_line(tmp_path: Path) -> None:
    """No PREFECT_API_URL and no profile: say so, and never start Prefect's temporary server."""
    script = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from drills.errors import TargetError
        from drills.plan import SecretRef
        from drills.plan.refs import resolve_secret
        started = time.monotonic()
        try:
            resolve_secret(SecretRef.parse("prefect:registry-token"), Path("."))
        except TargetError as exc:
            print(exc)
        print(round(time.monotonic() - started, 1))
        print(sorted(m for m in sys.modules if m.startswith("prefect.server")))
        """
    )
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != "VIRTUAL_ENV"
    }
    env |= {"PREFECT_HOME": str(tmp_path / "home"), "PREFECT_PROFILES_PATH": str(tmp_path / "p")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,  # no prefect.toml, .env or pyproject.toml here
        env=env | {"PYTHONPATH": str(Path(__file__).parents[2])},
        check=True,
    )
    message, seconds, modules = done.stdout.splitlines()
    assert message == (
        "secret reference prefect:registry-token: no Prefect server is configured "
        "(set PREFECT_API_URL, or select a Prefect profile that sets it)"
    )
    assert float(seconds) < 10  # Prefect's settings import; its temporary server takes 12–27 s
    assert modules == "[]"  # the temporary server's code was never even imported
    assert "Traceback" not in done.stderr


@pytest.mark.usefixtures("prefect_harness")
def test_prefect_reference_resolves_against_a_configured_server() -> None:
    """The guard above only stops the no-server case: with a server, blocks load."""
    from prefect.blocks.system import Secret

    Secret(value="block-value-not-printed").save("drills-plan-test-token", overwrite=True)
    ref = SecretRef.parse("prefect:drills-plan-test-token")
    assert resolve_secret(ref, Path(".")) == "block-value-not-printed"
    with pytest.raises(TargetError) as info:
        resolve_secret(SecretRef.parse("prefect:drills-plan-no-such-block"), Path("."))
    assert "Prefect Secret block could not be loaded" in info.value.cause
