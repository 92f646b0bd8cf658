"""A repo with 80+ planted credentials of 40+ kinds, for the "nothing comes out" tests.

The kinds follow the gitleaks and trufflehog rule sets and the leaks found in the wild:
credential files of many kinds (.envrc, env.local, .flaskenv, .pgpass, netrc, .aws/credentials,
kubeconfig, .yarnrc.yml, .npmrc, a Docker auth config, .pypirc); secrets assigned without quotes
in YAML, INI, env, properties, HCL and TOML; connection URLs with passwords; private keys in any
quoting (PEM in Markdown, Python `b"…"` lines, JS `'…' +` lines, a JSON service account, an
OpenSSH key file); JWTs; cloud, chat, AI and registry tokens; `Authorization` headers, `curl -u`
and tokens in query strings.

Every value is random (seeded) and assembled at run time from pieces, so this file holds no
whole secret for a scanner to flag, and a leak check can look for each value (and for any
12-character piece of it) in whatever comes out.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field

_ALNUM = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
_UPPER32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_HEX = "0123456789abcdef"
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_URLSAFE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"


@dataclass(frozen=True)
class Planted:
    kind: str
    value: str
    path: str


@dataclass
class PlantedRepo:
    files: dict[str, str] = field(default_factory=dict)
    secrets: list[Planted] = field(default_factory=list)

    @property
    def values(self) -> list[str]:
        return [s.value for s in self.secrets]

    @property
    def kinds(self) -> set[str]:
        return {s.kind for s in self.secrets}


class _Maker:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.repo = PlantedRepo()

    def token(self, length: int, alphabet: str = _ALNUM) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(length))

    def plant(self, kind: str, path: str, value: str) -> str:
        self.repo.secrets.append(Planted(kind, value, path))
        return value

    def pem_body(self, size: int = 700) -> list[str]:
        body = base64.b64encode(self.rng.randbytes(size)).decode()
        return [body[i : i + 64] for i in range(0, len(body), 64)]

    def plant_key(self, kind: str, path: str, body: list[str]) -> None:
        for line in body:
            self.plant(kind, path, line)


def _begin(kind: str) -> str:
    return "-----" + "BEGIN " + kind + "PRIVATE KEY-----"


def _end(kind: str) -> str:
    return "-----" + "END " + kind + "PRIVATE KEY-----"


def planted_repo(seed: int = 7) -> PlantedRepo:
    m = _Maker(seed)
    f = m.repo.files
    t = m.token
    # --- credential files ----------------------------------------------------------------------
    f[".envrc"] = (
        f"export DATABASE_PASSWORD={m.plant('envrc', '.envrc', t(20))}\n"
        f"export API_TOKEN={m.plant('envrc', '.envrc', t(32))}\n"
    )
    f["env.local"] = (
        f"STRIPE_SECRET={m.plant('env-local', 'env.local', t(28))}\n"
        f"SESSION_SECRET={m.plant('env-local', 'env.local', t(40))}\n"
    )
    f[".flaskenv"] = f"FLASK_APP=app.py\nSECRET_KEY={m.plant('flaskenv', '.flaskenv', t(32))}\n"
    f[".pgpass"] = f"db.internal:5432:app:app_user:{m.plant('pgpass', '.pgpass', t(18))}\n"
    f["netrc"] = f"machine api.example.com login deploy password {m.plant('netrc', 'netrc', t(22))}\n"
    f["ops/.netrc"] = (
        f"machine git.example.com\n  login ci\n  password {m.plant('netrc', 'ops/.netrc', t(22))}\n"
    )
    f[".aws/credentials"] = (
        "[default]\n"
        f"aws_access_key_id = {m.plant('aws-credentials', '.aws/credentials', 'AKIA' + t(16, _UPPER32))}\n"
        f"aws_secret_access_key = {m.plant('aws-credentials', '.aws/credentials', t(40, _B64))}\n"
    )
    kube_key = base64.b64encode(
        (_begin("RSA ") + "\n" + "\n".join(m.pem_body(300)) + "\n" + _end("RSA ") + "\n").encode()
    ).decode()
    f["deploy/kubeconfig"] = (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n    server: https://k8s.example.com\n"
        "users:\n- name: admin\n  user:\n"
        f"    token: {m.plant('kubeconfig-token', 'deploy/kubeconfig', t(48))}\n"
        f"    client-key-data: {m.plant('kubeconfig-key', 'deploy/kubeconfig', kube_key)}\n"
    )
    f[".yarnrc.yml"] = f"nodeLinker: node-modules\nnpmAuthToken: {m.plant('yarnrc', '.yarnrc.yml', t(36))}\n"
    f[".npmrc"] = f"//registry.npmjs.org/:_authToken={m.plant('npmrc', '.npmrc', 'npm_' + t(36))}\n"
    auth = base64.b64encode(f"ci:{t(20)}".encode()).decode()
    f["docker/config.json"] = json.dumps(
        {"auths": {"registry.example.com": {"auth": m.plant("docker-auth", "docker/config.json", auth)}}}
    )
    f[".pypirc"] = (
        "[pypi]\nusername = __token__\n"
        f"password = {m.plant('pypirc', '.pypirc', 'pypi-' + 'AgEIcHlwaS5vcmc' + t(70, _URLSAFE))}\n"
    )
    # --- unquoted (and quoted) assignments in config formats ------------------------------------
    f["config/app.yaml"] = (
        "database:\n  host: db.internal\n"
        f"  password: {m.plant('yaml-unquoted', 'config/app.yaml', t(18))}\n"
        f"api_key: {m.plant('yaml-unquoted', 'config/app.yaml', t(32))}\n"
        f"oauth:\n  client_secret: '{m.plant('yaml-quoted', 'config/app.yaml', t(30))}'\n"
        f"  secret: {m.plant('yaml-unquoted', 'config/app.yaml', t(24))}\n"
    )
    f["config/app.ini"] = (
        "[database]\nuser = app\n"
        f"password = {m.plant('ini-unquoted', 'config/app.ini', t(16))}\n"
        f"[oauth]\nclient_secret = {m.plant('ini-unquoted', 'config/app.ini', t(30))}\n"
    )
    f["scripts/deploy.sh"] = (
        "#!/bin/sh\nset -e\n"
        f"DB_PASS={m.plant('env-unquoted', 'scripts/deploy.sh', t(14))}\n"
        f"export AUTH_TOKEN={m.plant('env-unquoted', 'scripts/deploy.sh', t(30))}\n"
        f"curl -u deploy:{m.plant('curl-user', 'scripts/deploy.sh', t(18))} https://ci.example.com/hook\n"
        f'curl -H "Authorization: Bearer {m.plant("bearer", "scripts/deploy.sh", t(40))}" https://api.example.com\n'
        "./run --verbose\n"
    )
    f["src/main/resources/application.properties"] = (
        "spring.datasource.url=jdbc:postgresql://db/app\n"
        f"spring.datasource.password={m.plant('properties', 'src/main/resources/application.properties', t(20))}\n"
        f"jwt.secret={m.plant('properties', 'src/main/resources/application.properties', t(44))}\n"
    )
    f["infra/main.tf"] = (
        'provider "aws" {\n  region = "eu-west-1"\n'
        f'  access_key = "{m.plant("hcl", "infra/main.tf", "AKIA" + t(16, _UPPER32))}"\n'
        f'  secret_key = "{m.plant("hcl", "infra/main.tf", t(40, _B64))}"\n}}\n'
        f'resource "db" "main" {{\n  password = {m.plant("hcl-unquoted", "infra/main.tf", t(20))}\n}}\n'
    )
    f["tools/publish.toml"] = f'[registry]\ntoken = "{m.plant("toml", "tools/publish.toml", t(36))}"\n'
    f["config/settings.json"] = json.dumps(
        {
            "apiKey": m.plant("json", "config/settings.json", t(32)),
            "client_secret": m.plant("json", "config/settings.json", t(30)),
            "region": "eu-west-1",
        },
        indent=2,
    )
    # --- connection URLs --------------------------------------------------------------------
    urls = {
        "postgres": "postgres://app:{}@db.internal:5432/app",
        "mysql": "mysql://root:{}@mysql.internal/app",
        "mongodb": "mongodb+srv://admin:{}@cluster0.example.mongodb.net/app",
        "redis": "redis://:{}@cache.internal:6379/0",
        "amqp": "amqp://guest:{}@rabbit.internal:5672/",
    }
    lines = [
        f'{name.upper()}_URL = "{url.format(m.plant("url-password", "src/db.py", t(16)))}"'
        for name, url in urls.items()
    ]
    f["src/db.py"] = "\n".join(["import os", "", *lines, "", "def connect():", "    return None", ""])
    f["docker-compose.yml"] = (
        "services:\n  web:\n    environment:\n"
        f"      - DATABASE_URL=postgres://web:{m.plant('url-password', 'docker-compose.yml', t(16))}@db/web\n"
        f"      - CALLBACK=https://hooks.example.com/notify?access_token={m.plant('url-query', 'docker-compose.yml', t(32))}\n"
    )
    # --- private keys in any quoting ---------------------------------------------------------
    md_body = m.pem_body()
    m.plant_key("pem-markdown", "docs/keys.md", md_body)
    f["docs/keys.md"] = "# Keys\n\n```\n" + "\n".join([_begin("RSA "), *md_body, _end("RSA ")]) + "\n```\n"
    py_body = m.pem_body()
    m.plant_key("pem-python-bytes", "src/keys.py", py_body)
    f["src/keys.py"] = (
        "KEY = (\n"
        + f'    b"{_begin("EC ")}\\n"\n'
        + "".join(f'    b"{line}\\n"\n' for line in py_body)
        + f'    b"{_end("EC ")}\\n"\n)\n\n\ndef key():\n    return KEY\n'
    )
    js_body = m.pem_body()
    m.plant_key("pem-js-concat", "web/key.js", js_body)
    f["web/key.js"] = (
        f"const key = '{_begin('')}\\n' +\n"
        + "".join(f"  '{line}\\n' +\n" for line in js_body)
        + f"  '{_end('')}';\nexport default key;\n"
    )
    sa_body = m.pem_body(400)
    m.plant_key("pem-json", "gcp/service-account.json", sa_body)
    f["gcp/service-account.json"] = json.dumps(
        {
            "type": "service_account",
            "project_id": "demo",
            "private_key": "\n".join([_begin(""), *sa_body, _end("")]) + "\n",
            "client_email": "bot@demo.iam.gserviceaccount.com",
        }
    )
    ssh_body = m.pem_body(500)
    m.plant_key("openssh-key-file", "deploy/id_deploy", ssh_body)
    f["deploy/id_deploy"] = "\n".join([_begin("OPENSSH "), *ssh_body, _end("OPENSSH ")]) + "\n"
    # --- JWTs -----------------------------------------------------------------------------------
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = base64.urlsafe_b64encode(f'{{"sub":"{t(12)}","admin":true}}'.encode()).decode().rstrip("=")
    jwt = m.plant("jwt", "src/auth.py", f"{header}.{claims}.{t(43, _URLSAFE)}")
    # --- cloud, chat, AI and registry tokens ---------------------------------------------------
    # kind -> the token, or (what stands before it in the file, the token)
    tokens: dict[str, str | tuple[str, str]] = {
        "aws-access-key": "AKIA" + t(16, _UPPER32),
        "github-pat": "ghp" + "_" + t(36),
        "github-fine-grained": "github" + "_pat_11A" + t(79, _ALNUM + "_"),
        "github-oauth": "gho" + "_" + t(36),
        "gitlab-pat": "glpat" + "-" + t(20),
        "slack-bot": "xox" + "b-" + "2741836512-4018362957142-" + t(24),
        "slack-user": "xox" + "p-" + "2741836512-4018362957142-4018362957143-" + t(32, _HEX),
        "slack-app": "xapp" + "-1-A0123456789-" + t(30),
        "slack-webhook": ("https://hooks.slack" + ".com/services/T0123ABCD/B0123ABCD/", t(24)),
        "discord-bot": "M" + t(25) + "." + t(6) + "." + t(38, _URLSAFE),
        "discord-webhook": ("https://discord" + ".com/api/webhooks/123456789012345678/", t(68, _URLSAFE)),
        "telegram-bot": "5123456789" + ":AA" + t(33, _URLSAFE),
        "openai": "sk-" + "proj-" + t(48),
        "anthropic": "sk-" + "ant-api03-" + t(93, _URLSAFE) + "AA",
        "google-api-key": "AIza" + t(35),
        "google-oauth-secret": "GOCSPX" + "-" + t(28),
        "stripe-live": "sk" + "_live_" + t(24),
        "stripe-webhook": "whsec" + "_" + t(32),
        "sendgrid": "SG" + "." + t(22) + "." + t(43),
        "twilio": "SK" + t(32, _HEX),
        "npm": "npm" + "_" + t(36),
        "docker-hub": "dckr" + "_pat_" + t(27),
        "huggingface": "hf" + "_" + t(34, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
        "digitalocean": "dop" + "_v1_" + t(64, _HEX),
        "azure-storage": ("DefaultEndpointsProtocol=https;AccountName=demo;AccountKey=", t(86, _B64) + "=="),
        "mailgun": "key" + "-" + t(32, _HEX),
        "vault": "hvs" + "." + t(90, _URLSAFE),
        "shopify": "shpat" + "_" + t(32, _HEX),
        "databricks": "dapi" + t(32, _HEX),
        "heroku": "HRKU" + "-" + t(58, _URLSAFE),
        "sentry": "sntryu" + "_" + t(64, _HEX),
        "age": "AGE-SECRET-KEY-1" + t(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"),
        "doppler": "dp.pt." + t(43),
        "linear": "lin_api_" + t(40),
        "postman": "PMAK-" + t(24, _HEX) + "-" + t(34, _HEX),
    }
    code = ["import os", "", f'JWT = "{jwt}"']
    for kind, value in tokens.items():
        before, secret = value if isinstance(value, tuple) else ("", value)
        planted = before + m.plant(kind, "src/clients.py", secret)
        code.append(f"{kind.upper().replace('-', '_')} = {planted!r}")
    code += ["", "", "def client():", "    return os.environ.get('REGION', 'eu-west-1')", ""]
    f["src/clients.py"] = "\n".join(code)
    f["src/auth.py"] = (
        f'import jwt\n\nTEST_TOKEN = "{jwt}"\n\n\ndef decode(token):\n    return jwt.decode(token)\n'
    )
    f["README.md"] = "# vault-demo\n\nA service full of credentials that must never be shown.\n"
    return m.repo
