"""A corpus of secret samples, one per rule family of gitleaks' default configuration, in five contexts.

Each family is a line `rule id|a variable name it is kept under|the shape of its value`, written
from gitleaks' public rule descriptions and the services' documented token formats. In a shape,
`{xN}` stands for N random characters of class x (see `_CLASSES`): values are generated at run
time from a fixed seed, so they are obviously fake, have a realistic length, alphabet and
entropy, and this file holds no whole secret for a scanner (or a push protection) to flag.

The five contexts a family is put in (`contexts()`): alone on a line, an assignment in code or an
env file, YAML, JSON, and the output of a Jupyter notebook cell (an .ipynb file, JSON-escaped).
"Alone" applies to the families whose value names its service (a prefix such as `ntn_`); a
value of a family that gitleaks recognises only by the service's name next to it (a 32-hex
Algolia key) is, alone, indistinguishable from any random string, for gitleaks as for us.

`FORMATS` are the documents the issue names (Kubernetes Secrets, .dockerconfigjson, Terraform
state, `*_KEY` / `*_PW`, `passwd=`, INI, kubeconfig), each whole.
"""

from __future__ import annotations

import functools
import json
import random
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass

from worker.repos.secrets.gitleaks_rules import GITLEAKS_TOML

_CLASSES = {
    "a": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    "l": "abcdefghijklmnopqrstuvwxyz0123456789",
    "U": "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "Z": "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
    "h": "0123456789abcdef",
    "H": "0123456789ABCDEF",
    "f": "0123456789abcdefgh",
    "d": "0123456789",
    "c": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "b": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    "w": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
    "g": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
}

FAMILIES_TABLE = r"""
1password-secret-key|OP_SECRET_KEY|A3-{U6}-{U11}-{U5}-{U5}-{U5}
1password-service-account-token|OP_SERVICE_ACCOUNT_TOKEN|ops_eyJ{b300}
adafruit-api-key|ADAFRUIT_IO_KEY|{l32}
adobe-client-id|ADOBE_CLIENT_ID|{h32}
adobe-client-secret|ADOBE_CLIENT_SECRET|p8e-{l32}
age-secret-key|AGE_IDENTITY|AGE-SECRET-KEY-1{g58}
airtable-api-key|AIRTABLE_API_KEY|{l17}
airtable-personnal-access-token|AIRTABLE_TOKEN|pat{a14}.{h64}
algolia-api-key|ALGOLIA_ADMIN_KEY|{l32}
alibaba-access-key-id|ALIBABA_ACCESS_KEY_ID|LTAI{a20}
alibaba-secret-key|ALIBABA_SECRET_KEY|{l30}
anthropic-admin-api-key|ANTHROPIC_ADMIN_KEY|sk-ant-admin01-{w93}AA
anthropic-api-key|ANTHROPIC_API_KEY|sk-ant-api03-{w93}AA
artifactory-api-key|ARTIFACTORY_API_KEY|AKCp{a69}
artifactory-reference-token|ARTIFACTORY_TOKEN|cmVmd{a59}
asana-client-id|ASANA_CLIENT_ID|{d16}
asana-client-secret|ASANA_CLIENT_SECRET|{l32}
atlassian-api-token|ATLASSIAN_API_TOKEN|ATATT3{w186}
authress-service-client-access-key|AUTHRESS_KEY|sc_{l20}.{l5}.acc_{l20}.{w60}
aws-access-token|AWS_ACCESS_KEY_ID|AKIA{Z16}
aws-amazon-bedrock-api-key-long-lived|AWS_BEARER_TOKEN_BEDROCK|ABSK{b140}
aws-amazon-bedrock-api-key-short-lived|AWS_BEDROCK_SHORT_KEY|bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t{b120}
azure-ad-client-secret|AZURE_CLIENT_SECRET|{a3}8Q~{w34}
beamer-api-token|BEAMER_API_KEY|b_{l44}
bitbucket-client-id|BITBUCKET_CLIENT_ID|{l32}
bitbucket-client-secret|BITBUCKET_CLIENT_SECRET|{l64}
bittrex-access-key|BITTREX_ACCESS_KEY|{l32}
bittrex-secret-key|BITTREX_SECRET_KEY|{l32}
cisco-meraki-api-key|MERAKI_DASHBOARD_API_KEY|{h40}
clickhouse-cloud-api-secret-key|CLICKHOUSE_SECRET|4b1d{a38}
clojars-api-token|CLOJARS_TOKEN|CLOJARS_{l60}
cloudflare-api-key|CLOUDFLARE_API_TOKEN|{w40}
cloudflare-global-api-key|CLOUDFLARE_GLOBAL_KEY|{h37}
cloudflare-origin-ca-key|CLOUDFLARE_ORIGIN_CA_KEY|v1.0-{h24}-{h146}
codecov-access-token|CODECOV_TOKEN|{l32}
cohere-api-token|CO_API_KEY|{a40}
coinbase-access-token|COINBASE_ACCESS_TOKEN|{w64}
confluent-access-token|CONFLUENT_ACCESS_TOKEN|{l16}
confluent-secret-key|CONFLUENT_SECRET_KEY|{l64}
contentful-delivery-api-token|CONTENTFUL_DELIVERY_TOKEN|{w43}
curl-auth-header|CURL_CMD|curl -H "Authorization: Bearer {w40}" https://api.example.com/v1/items
curl-auth-user|CURL_CMD|curl --user deploy:{a20} https://api.example.com/v1/items
databricks-api-token|DATABRICKS_TOKEN|dapi{h32}
datadog-access-token|DATADOG_ACCESS_TOKEN|{l40}
defined-networking-api-token|DNKEY_TOKEN|dnkey-{l26}-{l52}
digitalocean-access-token|DIGITALOCEAN_ACCESS_TOKEN|doo_v1_{h64}
digitalocean-pat|DIGITALOCEAN_TOKEN|dop_v1_{h64}
digitalocean-refresh-token|DIGITALOCEAN_REFRESH_TOKEN|dor_v1_{h64}
discord-api-token|DISCORD_API_TOKEN|{h64}
discord-client-id|DISCORD_CLIENT_ID|{d18}
discord-client-secret|DISCORD_CLIENT_SECRET|{w32}
doppler-api-token|DOPPLER_TOKEN|dp.pt.{a43}
droneci-access-token|DRONECI_TOKEN|{l32}
dropbox-api-token|DROPBOX_API_TOKEN|{l15}
dropbox-long-lived-api-token|DROPBOX_LONG_TOKEN|{l11}AAAAAAAAAA{w43}
dropbox-short-lived-api-token|DROPBOX_SHORT_TOKEN|sl.{w135}
duffel-api-token|DUFFEL_TOKEN|duffel_test_{w43}
dynatrace-api-token|DT_API_TOKEN|dt0c01.{U24}.{a64}
easypost-api-token|EASYPOST_API_KEY|EZAK{a54}
easypost-test-api-token|EASYPOST_TEST_KEY|EZTK{a54}
etsy-access-token|ETSY_ACCESS_TOKEN|{l24}
facebook-access-token|FACEBOOK_ACCESS_TOKEN|{d15}|{w32}
facebook-page-access-token|FB_PAGE_TOKEN|EAAM{a120}
facebook-secret|FACEBOOK_APP_SECRET|{h32}
fastly-api-token|FASTLY_API_TOKEN|{w32}
finicity-api-token|FINICITY_APP_KEY|{h32}
finicity-client-secret|FINICITY_SECRET|{l20}
finnhub-access-token|FINNHUB_TOKEN|{l20}
flickr-access-token|FLICKR_TOKEN|{l32}
flutterwave-encryption-key|FLW_ENCRYPTION_KEY|FLWSECK_TEST-{f12}
flutterwave-public-key|FLW_PUBLIC_KEY|FLWPUBK_TEST-{f32}-X
flutterwave-secret-key|FLW_SECRET_KEY|FLWSECK_TEST-{f32}-X
flyio-access-token|FLY_API_TOKEN|fm2_{b140}
frameio-api-token|FRAMEIO_TOKEN|fio-u-{w64}
freemius-secret-key|FREEMIUS_CONFIG|'secret_key' => 'sk_{a29}'
freshbooks-access-token|FRESHBOOKS_TOKEN|{l64}
gcp-api-key|GOOGLE_API_KEY|AIza{w35}
generic-api-key|SERVICE_SECRET|{a12}-{a12}
github-app-token|GITHUB_APP_TOKEN|ghs_{a36}
github-fine-grained-pat|GITHUB_TOKEN|github_pat_{a82}
github-oauth|GITHUB_OAUTH_TOKEN|gho_{a36}
github-pat|GITHUB_PAT|ghp_{a36}
github-refresh-token|GITHUB_REFRESH_TOKEN|ghr_{a36}
gitlab-cicd-job-token|CI_JOB_TOKEN|glcbt-{a4}_{a20}
gitlab-deploy-token|GITLAB_DEPLOY_TOKEN|gldt-{a20}
gitlab-feature-flag-client-token|GITLAB_FF_TOKEN|glffct-{a20}
gitlab-feed-token|GITLAB_FEED_TOKEN|glft-{a20}
gitlab-incoming-mail-token|GITLAB_MAIL_TOKEN|glimt-{a25}
gitlab-kubernetes-agent-token|GITLAB_AGENT_TOKEN|glagent-{a50}
gitlab-oauth-app-secret|GITLAB_OAUTH_SECRET|gloas-{a64}
gitlab-pat|GITLAB_TOKEN|glpat-{a20}
gitlab-pat-routable|GITLAB_ROUTABLE_TOKEN|glpat-{a30}.01{l7}
gitlab-ptt|GITLAB_TRIGGER_TOKEN|glptt-{h40}
gitlab-rrt|GITLAB_RUNNER_REG_TOKEN|GR1348941{w20}
gitlab-runner-authentication-token|GITLAB_RUNNER_TOKEN|glrt-{a20}
gitlab-runner-authentication-token-routable|GITLAB_RUNNER_ROUTABLE|glrt-t1_{a30}.01{l7}
gitlab-scim-token|GITLAB_SCIM_TOKEN|glsoat-{a20}
gitlab-session-cookie|GITLAB_COOKIE|_gitlab_session={l32}
gitter-access-token|GITTER_TOKEN|{l40}
gocardless-api-token|GOCARDLESS_TOKEN|live_{w40}
grafana-api-key|GRAFANA_API_KEY|eyJrIjoi{a90}
grafana-cloud-api-token|GRAFANA_CLOUD_TOKEN|glc_{b60}
grafana-service-account-token|GRAFANA_SA_TOKEN|glsa_{a32}_{h8}
harness-api-key|HARNESS_API_KEY|pat.{w22}.{a24}.{a20}
hashicorp-tf-api-token|TFE_TOKEN|{l14}.atlasv1.{w66}
hashicorp-tf-password|administrator_login_password|{l16}
heroku-api-key|HEROKU_API_KEY|{h8}-{h4}-{h4}-{h4}-{h12}
heroku-api-key-v2|HEROKU_API_KEY_V2|HRKU-AA{w58}
hubspot-api-key|HUBSPOT_API_KEY|{H8}-{H4}-{H4}-{H4}-{H12}
huggingface-access-token|HF_TOKEN|hf_{c34}
huggingface-organization-api-token|HF_ORG_TOKEN|api_org_{c34}
infracost-api-token|INFRACOST_API_KEY|ico-{a32}
intercom-api-key|INTERCOM_ACCESS_TOKEN|{w60}
intra42-client-secret|INTRA42_SECRET|s-s4t2ud-{h64}
jfrog-api-key|JFROG_API_KEY|{l73}
jfrog-identity-token|JFROG_IDENTITY_TOKEN|{l64}
jwt|SESSION_JWT|eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{a40}.{w43}
jwt-base64|ENCODED_JWT|ZXlKaGJHY2lPaUpJVXpJMU5pSjku{b80}
kraken-access-token|KRAKEN_API_SECRET|{b86}
kubernetes-secret-yaml|K8S_MANIFEST|apiVersion: v1\nkind: Secret\nmetadata:\n  name: app\ndata:\n  password: {b24}\n
kucoin-access-token|KUCOIN_ACCESS_TOKEN|{h24}
kucoin-secret-key|KUCOIN_SECRET_KEY|{h8}-{h4}-{h4}-{h4}-{h12}
launchdarkly-access-token|LAUNCHDARKLY_ACCESS_TOKEN|{w40}
linear-api-key|LINEAR_API_KEY|lin_api_{a40}
linear-client-secret|LINEAR_CLIENT_SECRET|{h32}
linkedin-client-id|LINKEDIN_CLIENT_ID|{l14}
linkedin-client-secret|LINKEDIN_CLIENT_SECRET|{l16}
lob-api-key|LOB_API_KEY|test_{h35}
lob-pub-api-key|LOB_PUB_KEY|test_pub_{h31}
looker-client-id|LOOKER_CLIENT_ID|{l20}
looker-client-secret|LOOKER_CLIENT_SECRET|{l24}
mailchimp-api-key|MAILCHIMP_API_KEY|{h32}-us12
mailgun-private-api-token|MAILGUN_API_KEY|key-{h32}
mailgun-pub-key|MAILGUN_PUBLIC_KEY|pubkey-{h32}
mailgun-signing-key|MAILGUN_SIGNING_KEY|{f32}-{f8}-{f8}
mapbox-api-token|MAPBOX_TOKEN|pk.{l60}.{l22}
mattermost-access-token|MATTERMOST_TOKEN|{l26}
maxmind-license-key|MAXMIND_LICENSE_KEY|{a6}_{a29}_mmk
messagebird-api-token|MESSAGEBIRD_API_KEY|{l25}
messagebird-client-id|MESSAGEBIRD_CLIENT_ID|{h8}-{h4}-{h4}-{h4}-{h12}
microsoft-teams-webhook|TEAMS_WEBHOOK|https://contoso.webhook.office.com/webhookb2/{h8}-{h4}-{h4}-{h4}-{h12}@{h8}-{h4}-{h4}-{h4}-{h12}/IncomingWebhook/{h32}/{h8}-{h4}-{h4}-{h4}-{h12}
netlify-access-token|NETLIFY_AUTH_TOKEN|{w43}
new-relic-browser-api-token|NEW_RELIC_BROWSER_KEY|NRJS-{h19}
new-relic-insert-key|NEW_RELIC_INSERT_KEY|NRII-{l32}
new-relic-user-api-id|NEW_RELIC_USER_ID|{l64}
new-relic-user-api-key|NEW_RELIC_API_KEY|NRAK-{U27}
notion-api-token|NOTION_TOKEN|ntn_{d11}{a35}
npm-access-token|NPM_TOKEN|npm_{a36}
nuget-config-password|NUGET_CONFIG|<add key="ClearTextPassword" value="{a16}" />
nytimes-access-token|NYTIMES_API_KEY|{w32}
octopus-deploy-api-key|OCTOPUS_API_KEY|API-{U26}
okta-access-token|OKTA_API_TOKEN|00{w40}
openai-api-key|OPENAI_API_KEY|sk-proj-{w74}T3BlbkFJ{w74}
openshift-user-token|OPENSHIFT_TOKEN|sha256~{w43}
perplexity-api-key|PERPLEXITY_API_KEY|pplx-{a48}
plaid-api-token|PLAID_ACCESS_TOKEN|access-sandbox-{h8}-{h4}-{h4}-{h4}-{h12}
plaid-client-id|PLAID_CLIENT_ID|{l24}
plaid-secret-key|PLAID_SECRET|{l30}
planetscale-api-token|PLANETSCALE_TOKEN|pscale_tkn_{w43}
planetscale-oauth-token|PLANETSCALE_OAUTH_TOKEN|pscale_oauth_{w43}
planetscale-password|PLANETSCALE_PASSWORD|pscale_pw_{w43}
postman-api-token|POSTMAN_API_KEY|PMAK-{h24}-{h34}
prefect-api-token|PREFECT_API_KEY|pnu_{a36}
private-key|TLS_KEY|-----BEGIN RSA PRIVATE KEY-----\n{b64}\n{b64}\n{b40}\n-----END RSA PRIVATE KEY-----
privateai-api-token|PRIVATE_AI_API_KEY|{l32}
pulumi-api-token|PULUMI_ACCESS_TOKEN|pul-{h40}
pypi-upload-token|PYPI_TOKEN|pypi-AgEIcHlwaS5vcmc{w80}
rapidapi-access-token|RAPIDAPI_KEY|{w50}
readme-api-token|README_API_KEY|rdme_{l70}
rubygems-api-token|GEM_HOST_API_KEY|rubygems_{h48}
scalingo-api-token|SCALINGO_API_TOKEN|tk-us-{w48}
sendbird-access-id|SENDBIRD_APP_ID|{H8}-{H4}-{H4}-{H4}-{H12}
sendbird-access-token|SENDBIRD_API_TOKEN|{h40}
sendgrid-api-token|SENDGRID_API_KEY|SG.{w22}.{w43}
sendinblue-api-token|BREVO_API_KEY|xkeysib-{h64}-{a16}
sentry-access-token|SENTRY_AUTH_TOKEN|{h64}
sentry-org-token|SENTRY_ORG_TOKEN|sntrys_eyJpYXQiOjE3MDAwMDAwMDAuMCwidXJsIjoiaHR0cHM6Ly9zZW50cnkuaW8iLCJyZWdpb25fdXJsIjoiaHR0cHM6Ly91cy5zZW50cnkuaW8iLCJvcmciOiJ{a20}_{b43}
sentry-user-token|SENTRY_USER_TOKEN|sntryu_{h64}
settlemint-application-access-token|SETTLEMINT_AAT|sm_aat_{a16}
settlemint-personal-access-token|SETTLEMINT_PAT|sm_pat_{a16}
settlemint-service-access-token|SETTLEMINT_SAT|sm_sat_{a16}
shippo-api-token|SHIPPO_API_TOKEN|shippo_live_{h40}
shopify-access-token|SHOPIFY_ACCESS_TOKEN|shpat_{h32}
shopify-custom-access-token|SHOPIFY_CUSTOM_TOKEN|shpca_{h32}
shopify-private-app-access-token|SHOPIFY_PRIVATE_TOKEN|shppa_{h32}
shopify-shared-secret|SHOPIFY_SHARED_SECRET|shpss_{h32}
sidekiq-secret|BUNDLE_ENTERPRISE__CONTRIBSYS__COM|{h8}:{h8}
sidekiq-sensitive-url|SIDEKIQ_SOURCE|https://{h8}:{h8}@gems.contribsys.com/
slack-app-token|SLACK_APP_TOKEN|xapp-1-A{U10}-{d13}-{h64}
slack-bot-token|SLACK_BOT_TOKEN|xoxb-{d12}-{d13}-{a24}
slack-config-access-token|SLACK_CONFIG_TOKEN|xoxe.xoxp-1-{U164}
slack-config-refresh-token|SLACK_CONFIG_REFRESH|xoxe-1-{U146}
slack-legacy-bot-token|SLACK_LEGACY_BOT|xoxb-{d11}-{a24}
slack-legacy-token|SLACK_LEGACY_TOKEN|xoxs-{d10}-{d10}-{d12}-{h64}
slack-legacy-workspace-token|SLACK_WORKSPACE_TOKEN|xoxa-2-{a40}
slack-user-token|SLACK_USER_TOKEN|xoxp-{d12}-{d12}-{d13}-{h32}
slack-webhook-url|SLACK_WEBHOOK_URL|https://hooks.slack.com/services/T{U8}/B{U10}/{a24}
snyk-api-token|SNYK_TOKEN|{h8}-{h4}-{h4}-{h4}-{h12}
sonar-api-token|SONAR_TOKEN|squ_{h40}
sourcegraph-access-token|SRC_ACCESS_TOKEN|sgp_{h16}_{h40}
square-access-token|SQUARE_ACCESS_TOKEN|EAAA{w60}
squarespace-access-token|SQUARESPACE_API_KEY|{h8}-{h4}-{h4}-{h4}-{h12}
stripe-access-token|STRIPE_SECRET_KEY|sk_live_{a99}
sumologic-access-id|SUMO_ACCESS_ID|su{a12}
sumologic-access-token|SUMO_ACCESS_KEY|{l64}
telegram-bot-api-token|TELEGRAM_BOT_TOKEN|{d10}:AA{w33}
travisci-access-token|TRAVIS_TOKEN|{l22}
twilio-api-key|TWILIO_API_KEY|SK{h32}
twitch-api-token|TWITCH_CLIENT_SECRET|{l30}
twitter-access-secret|TWITTER_ACCESS_SECRET|{l45}
twitter-access-token|TWITTER_ACCESS_TOKEN|{d18}-{a40}
twitter-api-key|TWITTER_API_KEY|{l25}
twitter-api-secret|TWITTER_API_SECRET|{l50}
twitter-bearer-token|TWITTER_BEARER_TOKEN|AAAAAAAAAAAAAAAAAAAAA{a90}
typeform-api-token|TYPEFORM_TOKEN|tfp_{w59}
vault-batch-token|VAULT_BATCH_TOKEN|hvb.{w160}
vault-service-token|VAULT_TOKEN|hvs.{w100}
yandex-access-token|YANDEX_ACCESS_TOKEN|t1.{w40}.{w86}
yandex-api-key|YANDEX_API_KEY|AQVN{w36}
yandex-aws-access-token|YANDEX_AWS_KEY|YC{w38}
zendesk-secret-key|ZENDESK_API_TOKEN|{l40}
"""
CONTEXTS = ("alone", "assignment", "yaml", "json", "notebook")


@dataclass(frozen=True)
class Sample:
    family: str  # the gitleaks rule id
    name: str  # the variable it is kept under
    value: str  # the secret, as it would be written
    random_parts: tuple[str, ...]  # the generated pieces: none of them may survive redaction

    def leaked(self, redacted: str, window: int = 8) -> bool:
        """Does any generated piece (8 characters or more of it) survive in `redacted`?"""
        for part in self.random_parts:
            if len(part) < window:
                continue
            if any(part[i : i + window] in redacted for i in range(len(part) - window + 1)):
                return True
        return False


def _fill(shape: str, rng: random.Random) -> tuple[str, tuple[str, ...]]:
    out: list[str] = []
    parts: list[str] = []
    i = 0
    while i < len(shape):
        if shape[i] == "{" and i + 2 < len(shape) and shape[i + 1] in _CLASSES:
            close = shape.index("}", i)
            alphabet = _CLASSES[shape[i + 1]]
            part = "".join(rng.choice(alphabet) for _ in range(int(shape[i + 2 : close])))
            out.append(part)
            parts.append(part)
            i = close + 1
        else:
            out.append(shape[i])
            i += 1
    return "".join(out).replace("\\n", "\n"), tuple(parts)


def samples() -> list[Sample]:
    """One sample per family, the same on every run."""
    found = []
    for number, line in enumerate(FAMILIES_TABLE.strip().splitlines()):
        family, name, shape = line.split("|", 2)
        value, parts = _fill(shape, random.Random(f"{family}:{number}"))
        found.append(Sample(family, name, value, parts))
    return found


@functools.cache
def _family_keywords() -> dict[str, tuple[str, ...]]:
    config = tomllib.loads(GITLEAKS_TOML.read_text(encoding="utf-8"))
    return {rule["id"]: tuple(k.lower() for k in rule.get("keywords", ())) for rule in config["rules"]}


def is_self_identifying(sample: Sample) -> bool:
    """Does the value alone name its service (one of its gitleaks rule's keywords is in it)?"""
    return any(keyword in sample.value.lower() for keyword in _family_keywords()[sample.family])


def _yaml(sample: Sample) -> str:
    key = sample.name.lower()
    if "\n" in sample.value:
        body = "\n".join("    " + line for line in sample.value.splitlines())
        return f"service:\n  {key}: |\n{body}\n  region: eu-west-1\n"
    return f"service:\n  region: eu-west-1\n  {key}: {sample.value}\n  timeout: 30\n"


def _notebook(text: str) -> str:
    """An .ipynb file whose one code cell printed `text`, as Jupyter writes it (indent 1)."""
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 3,
                "metadata": {},
                "outputs": [
                    {"name": "stdout", "output_type": "stream", "text": text.splitlines(keepends=True)}
                ],
                "source": ["print(settings.describe())"],
            }
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(notebook, indent=1) + "\n"


def context(sample: Sample, where: str, self_identifying: bool) -> str | None:
    """The sample written in one context; None when the context does not apply (see the module doc)."""
    value = sample.value
    if where == "alone":
        return f"{value}\n" if self_identifying else None
    if where == "assignment":
        if "\n" in value:
            return f'{sample.name} = """\n{value}\n"""\n'
        return f'import os\n\n{sample.name} = "{value}"\nTIMEOUT = 30\n'
    if where == "yaml":
        return _yaml(sample)
    if where == "json":
        return json.dumps({"service": {"region": "eu-west-1", sample.name.lower(): value}}, indent=2) + "\n"
    if self_identifying:
        return _notebook(f"connecting to the API\nusing credentials {value}\ndone\n")
    return _notebook(f"connecting to the API\n{sample.name}={value}\ndone\n")


def all_contexts(sample: Sample) -> Iterator[tuple[str, str]]:
    self_identifying = is_self_identifying(sample)
    for where in CONTEXTS:
        text = context(sample, where, self_identifying)
        if text is not None:
            yield where, text


def _piece(seed: str, length: int, alphabet: str = "a") -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(_CLASSES[alphabet]) for _ in range(length))


def formats() -> list[tuple[str, str, tuple[str, ...]]]:
    """(name, whole document, the secrets in it) for each format the issue names."""
    import base64

    pw, b64pw = _piece("k8s-pw", 18), base64.b64encode(_piece("k8s-pw", 18).encode()).decode()
    auth = base64.b64encode(f"ci-bot:{_piece('dcj', 24)}".encode()).decode()
    docker = base64.b64encode(
        json.dumps({"auths": {"registry.example.com": {"auth": auth}}}).encode()
    ).decode()
    tf, tfmap = _piece("tf", 24), _piece("tf-map", 20)
    kube = _piece("kube", 40, "l")
    found = [
        (
            "kubernetes secret data",
            f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n"
            f"  username: YWRtaW4=\n  password: {b64pw}\n",
            (b64pw,),
        ),
        (
            "kubernetes secret stringData",
            f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  DATABASE_URL: postgres-{pw}\n",
            (f"postgres-{pw}",),
        ),
        (
            "kubernetes .dockerconfigjson",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: regcred\ntype: kubernetes.io/dockerconfigjson\n"
            f"data:\n  .dockerconfigjson: {docker}\n",
            (docker,),
        ),
        ("dockerconfigjson alone", f'{{"dockerconfigjson": "{docker}"}}\n', (docker,)),
        (
            "terraform state sensitive output",
            json.dumps(
                {
                    "version": 4,
                    "outputs": {
                        "db_conn": {
                            "value": f"host=db user=app password={tf}",
                            "type": "string",
                            "sensitive": True,
                        },
                        "api_tokens": {"value": {"ci": tfmap}, "type": ["map", "string"], "sensitive": True},
                        "region": {"value": "eu-west-1", "type": "string"},
                    },
                },
                indent=2,
            ),
            (tf, tfmap),
        ),
        ("service _KEY", f"MAPS_KEY={_piece('mk', 32)}\n", (_piece("mk", 32),)),
        ("service _KEY yaml", f"payments:\n  stripe_key: {_piece('sk', 28)}\n", (_piece("sk", 28),)),
        ("service _PW", f'SMTP_PW = "{_piece("pw", 14)}"\n', (_piece("pw", 14),)),
        ("service _PW env", f"export DB_PW={_piece('dbpw', 12)}\n", (_piece("dbpw", 12),)),
        ("passwd=", f"mysql --user=app --passwd={_piece('mysql', 14)} shop\n", (_piece("mysql", 14),)),
        ("passwd= ini", f"[client]\nuser = app\npasswd={_piece('ini', 14)}\n", (_piece("ini", 14),)),
        (
            "ini secret:",
            f"[oauth]\nclient_id: web\nsecret: {_piece('inisec', 20)}\n",
            (_piece("inisec", 20),),
        ),
        (
            "yaml api_token:",
            f"integrations:\n  pagerduty:\n    api_token: {_piece('pd', 20)}\n",
            (_piece("pd", 20),),
        ),
        (
            "kubeconfig token:",
            f"apiVersion: v1\nkind: Config\nusers:\n- name: ci\n  user:\n    token: {kube}\n",
            (kube,),
        ),
    ]
    return found
