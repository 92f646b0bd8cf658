"""What counts as a secret: the detection rules, all in RE2 syntax (linear time, whatever the input).

Three sources, one engine (worker/repos/secrets/redaction.py):

- **gitleaks' default rules** (about 220 families), vendored and compiled with RE2:
  worker/repos/secrets/gitleaks_rules.py.
- **detect-secrets' own rules**, every regex-based plugin the installed library registers:
  worker/repos/secrets/detect_secrets_rules.py.
- **Rules of our own** (below), for the kinds detect-secrets lacks. They follow the shapes of
  the gitleaks and trufflehog rule sets (token prefixes and lengths), written here in RE2
  syntax: modern cloud, chat, AI and registry tokens; secrets assigned to secret-named keys in
  any syntax (YAML, INI, env, properties, HCL, TOML, JSON, code), quoted or not; passwords in
  connection URLs, query strings, `Authorization` headers, `curl -u`, netrc and pgpass lines;
  JWTs; base64-wrapped PEM; `.dockerconfigjson` values, Terraform state outputs marked
  sensitive, service-named `*_KEY` / `*_PW` keys holding a credential-shaped value.

Private-key blocks are found by the engine line by line (a BEGIN line, its body in any quoting,
the END line), and the values of Kubernetes Secrets by the document they are in
(worker/repos/secrets/secret_blocks.py), not by a rule here.

Each rule names the lower-case literals ("keywords") that every one of its matches contains:
one pass of an RE2 set over a text says which keywords occur, and only the rules whose keyword
occurred run. A rule without keywords always runs.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

FIRST_GROUP = -1


@dataclass(frozen=True)
class Allowlist:
    """gitleaks' exceptions to a rule: a match is no secret when one of these matches `target`."""

    target: str  # "secret" (the redacted value), "match" (the rule's whole match) or "line"
    regexes: tuple[str, ...] = ()  # RE2 syntax
    stopwords: tuple[str, ...] = ()  # a secret containing one of these (any case) is a word


@dataclass(frozen=True)
class Rule:
    kind: str  # the marker's type: [REDACTED:<kind>]
    pattern: str  # RE2 syntax
    keywords: tuple[str, ...] = ()  # lower-case literals every match contains; () = always run
    check: str | None = None  # a post-filter on the redacted value (see secret_filters.VALUE_CHECKS)
    # What is redacted: None, the longest capture group that matched (our rules); 0, the whole
    # match; n > 0, group n; FIRST_GROUP, gitleaks' default (see Redactor._matches).
    group: int | None = None
    entropy: float = 0.0  # the secret must have more bits per character than this (gitleaks)
    allowlists: tuple[Allowlist, ...] = ()
    # None: the rule runs over the whole text. A number n is a promise, argued from the pattern
    # where the rule is declared: every match holds one of `keywords` (in any case) on its first
    # line and spans at most n line breaks after it; the engine then runs the rule only over the
    # lines holding a keyword and the n below each (worker/repos/secrets/keyword_lines.py). A match may
    # also begin with the line break before its first line only through a leading `(?:^|[^…])`,
    # whose `^` then starts the same match at the line's start, with the same groups.
    # Not in repr: blobstore.generation() fingerprints the rules by repr, and where a rule is
    # searched does not change what it finds, so stored blobs stay valid.
    lines_after: int | None = field(default=None, repr=False)


# A value of a secret-named key, when written without quotes: up to whitespace, a quote or a
# comment. What it holds is judged afterwards (secret_filters.VALUE_CHECKS), since `token = request.token`
# is code and `token: f00Bar9z` is a secret.
_UNQUOTED = r"""([^\s'"`]{1,600})"""
_QUOTED = r""""([^"\n]{1,600})"|'([^'\n]{1,600})'|`([^`\n]{1,600})`"""

# The last word of a key that holds a secret: `db_password`, `spring.datasource.password`,
# `AWS_SECRET_ACCESS_KEY`, `npmAuthToken`, `client-key-data`. The word must end the key, so
# `token_type`, `password_hint` or `secret_name` do not count. Short words (`pass`, `auth`)
# need a separator before them, so `bypass` and `oauth` do not count either.
_GLUED_WORD = (
    r"(?:password|passwd|passphrase|secret|token|api[_.-]?key|apikey|access[_.-]?key|"
    r"private[_.-]?key|privatekey|auth[_.-]?key|signing[_.-]?key|encryption[_.-]?key|"
    r"master[_.-]?key|account[_.-]?key|app[_.-]?key|consumer[_.-]?key|license[_.-]?key|"
    r"session[_.-]?key|shared[_.-]?key|client[_.-]?key|storage[_.-]?key|service[_.-]?key|"
    r"deploy[_.-]?key|admin[_.-]?key|root[_.-]?key|secret[_.-]?key|hmac[_.-]?key|key[_.-]?data|"
    r"credentials?|authident|connection[_.-]?string|webhook[_.-]?url)"
)
_SEPARATED_WORD = r"(?:pass|pwd|pw|auth|creds|dsn|salt|conn[_.-]?str)"
_SECRET_WORD = "(?:" + _GLUED_WORD + "|" + _SEPARATED_WORD + ")"
_KEY = (
    r"(?:^|[^A-Za-z0-9])(?i:[A-Za-z0-9_.-]{0,80}?"
    + _GLUED_WORD
    + r"|(?:[A-Za-z0-9_.-]{0,80}?[_.-])?"
    + _SEPARATED_WORD
    + ")"
)
# A whole key that names a secret (no leading context): what config files are judged by
# (worker/repos/secrets/config_values.py), the same words as `_KEY`.
SECRET_KEY_PATTERN = (
    r"[A-Za-z0-9_.-]{0,80}?" + _GLUED_WORD + r"|(?:[A-Za-z0-9_.-]{0,80}?[_.-])?" + _SEPARATED_WORD
)
# Between the key and its value: an optional closing quote, then = : := => += or a YAML colon.
_SEPARATOR = r"""["']?[ \t]{0,10}(?:=>|:=|\+=|=|:)[ \t]{0,10}"""
_KEYWORDS_OF_KEY = (
    "pass",
    "pwd",
    "pw",
    "secret",
    "token",
    "key",
    "cred",
    "auth",
    "dsn",
    "conn",
    "webhook",
    "salt",
)
# Every key SECRET_KEY_PATTERN matches holds one of these (any case): a cheap test before it.
SECRET_KEY_WORDS = _KEYWORDS_OF_KEY

# A key that names a service and ends in KEY or PW (`STRIPE_KEY`, `smtp_pw`, `mapsKey`): it may hold
# a secret or a column name (`PRIMARY_KEY = "user_id"`), so only a credential-shaped value counts.
_SERVICE_KEY = (
    r"(?:^|[^A-Za-z0-9])(?:[A-Z][A-Z0-9_.-]{0,60}[_.-](?:KEY|PW|PWD|PASS|PASSWD)|"
    r"[a-z][a-z0-9_.-]{0,60}[_.-](?:key|pw|pwd|pass|passwd)|[a-z][a-zA-Z0-9]{0,60}(?:Key|Pw|Pwd))"
)
_SERVICE_KEY_WORDS = ("key", "pw", "pass")


def _base64_prefixes(*texts: str) -> tuple[str, ...]:
    """The base64 every encoding of a text starting with one of `texts` starts with."""
    prefixes = []
    for text in texts:
        raw = text.encode()
        prefixes.append(base64.b64encode(raw[: len(raw) // 3 * 3]).decode())
    return tuple(prefixes)


# `.dockerconfigjson` / `.dockercfg` values: base64 of `{"auths": …}`, in any JSON spacing.
_DOCKER_CONFIG = _base64_prefixes(
    '{"auths":', '{ "auths":', '{\n  "auths":', '{\n\t"auths":', '{\n    "auths":'
)

OWN_RULES: tuple[Rule, ...] = (
    Rule(
        "secret-assignment",
        _SERVICE_KEY + _SEPARATOR + "(?:" + _QUOTED + ")",
        _SERVICE_KEY_WORDS,
        "credential",
        lines_after=0,
    ),
    Rule(
        "secret-assignment",
        _SERVICE_KEY + _SEPARATOR + _UNQUOTED,
        _SERVICE_KEY_WORDS,
        "credential",
        lines_after=0,
    ),
    Rule(
        "docker-config",
        r"\b(?:" + "|".join(_DOCKER_CONFIG) + r")[A-Za-z0-9+/]{8,}={0,2}",
        tuple(p.lower() for p in _DOCKER_CONFIG),
    ),
    # Terraform state: an output marked sensitive (`"value": …, "type": …, "sensitive": true`).
    Rule(
        "terraform-sensitive",
        r'"value":[ \t]*("(?:[^"\\\n]|\\.)*"|\{[^{}]*\}|\[[^\[\]]*\]|[^\s,{}\[\]"]{1,100})'
        r'\s{0,40},\s{0,40}"type":[ \t]*(?:"[^"\n]{0,100}"|\[[^\[\]]{0,400}\])\s{0,40},\s{0,40}"sensitive":[ \t]*true',
        ('"sensitive"',),
    ),
    # --- secret-named keys, any syntax --------------------------------------------------------
    # These and the two `_SERVICE_KEY` rules above are the costliest rules (their keywords are in
    # almost every code file) and are line-bounded (lines_after=0): no part of _KEY,
    # _SERVICE_KEY, _SEPARATOR, _QUOTED, _UNQUOTED or the XML patterns matches a line break
    # ([A-Za-z0-9_.-], [ \t], [^"\n], [^\s'"`], [\w.-], [^<\n]) except the leading
    # `[^A-Za-z0-9]` of `(?:^|[^A-Za-z0-9])` (see Rule.lines_after); every alternative of
    # _GLUED_WORD and _SEPARATED_WORD holds one of _KEYWORDS_OF_KEY, and KEY/PW/PASS… of
    # _SERVICE_KEY one of _SERVICE_KEY_WORDS, in any case.
    Rule(
        "secret-assignment",
        _KEY + _SEPARATOR + "(?:" + _QUOTED + ")",
        _KEYWORDS_OF_KEY,
        "quoted",
        lines_after=0,
    ),
    Rule("secret-assignment", _KEY + _SEPARATOR + _UNQUOTED, _KEYWORDS_OF_KEY, "unquoted", lines_after=0),
    # A typed assignment: `password: str = "x"`, `token: string = 'x'`.
    Rule(
        "secret-assignment",
        _KEY + r"[ \t]*:[ \t]*[A-Za-z_][\w.\[\], |]{0,60}=[ \t]*(?:" + _QUOTED + ")",
        _KEYWORDS_OF_KEY,
        "quoted",
        lines_after=0,
    ),
    # XML: <password>x</password>, <add key="Password" value="x"/> (NuGet), <secret>…
    Rule(
        "secret-assignment",
        r"(?i)<(?:[\w.-]{0,40}:)?[\w.-]{0,40}?" + _SECRET_WORD + r">([^<\n]{1,600})</",
        _KEYWORDS_OF_KEY,
        "quoted",
        lines_after=0,
    ),
    # NuGet's `<add key="ClearTextPassword" value="x"/>`, also inside a JSON string (`\"`).
    Rule(
        "secret-assignment",
        r"""(?i)<add[ \t]+key=\\?["'](?:ClearText)?Password\\?["'][ \t]+value=\\?["']([^"'\\\n]{1,600})""",
        ("<add",),
        "quoted",
    ),
    Rule(
        "secret-assignment",
        r"""(?i)key=["'][\w.-]{0,40}?"""
        + _SECRET_WORD
        + r"""["'][ \t]{1,10}value=["']([^"'\n]{1,600})["']""",
        _KEYWORDS_OF_KEY,
        "quoted",
        lines_after=0,
    ),
    # --- passwords in URLs, headers and command lines ---------------------------------------
    Rule(
        "url-password",
        r"[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/?#@'\"<>]{0,256}:([^\s/?#@'\"<>]{1,256})@",
        ("://",),
        "quoted",
    ),
    Rule(
        "url-secret",
        r"(?i)[?&;](?:access[_-]?token|auth[_-]?token|token|api[_-]?key|apikey|key|secret|"
        r"client[_-]?secret|password|passwd|pwd|sig|signature|auth)=([^&\s'\"#<>]{6,600})",
        ("token=", "key=", "secret=", "password=", "passwd=", "pwd=", "sig=", "signature=", "auth="),
        "quoted",
    ),
    Rule(
        "authorization",
        r"""(?i)authorization["']?[ \t]{0,10}[:=,][ \t]{0,10}["']?(?:bearer|basic|token|bot|digest|"""
        r"""apikey|key)?[ \t]{0,5}([A-Za-z0-9._~+/=-]{12,600})""",
        ("authorization",),
        "quoted",
    ),
    Rule("authorization", r"(?i)\bbearer[ \t]{1,5}([A-Za-z0-9._~+/-]{20,600}={0,2})", ("bearer",), "quoted"),
    Rule(
        "curl-credentials",
        r"""(?i)\bcurl\b[^\n]{0,300}?\s(?:-u|--user)[ =]?["']?[^\s:'"]{1,100}:([^\s'"]{3,300})""",
        ("curl",),
        "quoted",
    ),
    # netrc: `machine host login me password x` on one line, or `password x` alone on its line.
    Rule(
        "netrc-password",
        r"(?i)\b(?:machine|default)\b[^\n]{0,300}?\bpassword[ \t]+(\S{1,300})",
        ("password",),
    ),
    Rule("netrc-password", r"(?im)^[ \t]*password[ \t]+(\S{1,300})[ \t]*$", ("password",)),
    # pgpass: host:port:database:user:password
    Rule(
        "pgpass-password",
        r"(?m)^[^:\s#]{1,253}:(?:\d{1,5}|\*):[^:\s]{1,63}:[^:\s]{1,63}:(\S{1,300})$",
        (":",),
    ),
    # --- tokens with a recognisable shape (after the gitleaks and trufflehog rule sets) --------
    Rule(
        "aws-access-key",
        r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b",
        ("akia", "asia", "abia", "acca", "a3t"),
    ),
    Rule("github-token", r"\bgh[pousr]_[A-Za-z0-9_]{30,255}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    Rule("github-token", r"\bgithub_pat_[A-Za-z0-9_]{22,255}", ("github_pat_",)),
    Rule(
        "gitlab-token",
        r"\bgl(?:pat|dt|ft|soat|rt|ptt|cbt|imt|agent|oas|ffct|sa|c)-[A-Za-z0-9_.-]{20,300}",
        ("gl",),
    ),
    Rule("gitlab-token", r"\bGR1348941[A-Za-z0-9_-]{20,300}", ("gr1348941",)),
    Rule("slack-token", r"\bxox[abposre](?:\.xox[bp])?-[A-Za-z0-9-]{10,300}", ("xox",)),
    Rule("slack-token", r"\bxapp-\d-[A-Za-z0-9-]{10,300}", ("xapp-",)),
    Rule(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,200}",
        ("hooks.slack.com",),
    ),
    Rule(
        "discord-webhook",
        r"(?i)discord(?:app)?\.com/api/webhooks/\d{5,30}/[A-Za-z0-9_-]{30,200}",
        ("discord",),
    ),
    Rule("discord-token", r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"),
    Rule("telegram-bot-token", r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}", (":aa",)),
    Rule("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,300}", ("sk-ant-",)),
    Rule("openai-key", r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,300}", ("sk-",)),
    Rule("openai-key", r"\bsk-[A-Za-z0-9]{32,300}", ("sk-",)),
    Rule("openai-key", r"\bsk-[A-Za-z0-9_-]{10,}T3BlbkFJ[A-Za-z0-9_-]{10,}", ("t3blbkfj",)),
    Rule("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}", ("aiza",)),
    Rule("google-oauth-secret", r"\bGOCSPX-[A-Za-z0-9_-]{28}", ("gocspx-",)),
    Rule("stripe-key", r"\b(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,247}", ("_live_", "_test_", "_prod_")),
    Rule("stripe-key", r"\bwhsec_[A-Za-z0-9+/=]{20,200}", ("whsec_",)),
    Rule("sendgrid-key", r"\bSG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}", ("sg.",)),
    Rule("mailgun-key", r"\bkey-[0-9a-f]{32}\b", ("key-",)),
    Rule("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b", ("npm_",)),
    Rule("pypi-token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}", ("pypi-age",)),
    Rule("docker-token", r"\bdckr_pat_[A-Za-z0-9_-]{20,200}", ("dckr_pat_",)),
    Rule("huggingface-token", r"\b(?:hf|api_org)_[A-Za-z]{34}\b", ("hf_", "api_org_")),
    Rule("digitalocean-token", r"\bdo[opr]_v1_[a-f0-9]{64}", ("_v1_",)),
    Rule("heroku-key", r"\bHRKU-[A-Za-z0-9_-]{20,200}", ("hrku-",)),
    Rule("shopify-token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", ("shp",)),
    Rule("square-token", r"\bsq0(?:atp|csp)-[A-Za-z0-9_-]{22,60}", ("sq0",)),
    Rule("square-token", r"\bEAAA[A-Za-z0-9_-]{60}", ("eaaa",)),
    Rule("databricks-token", r"\bdapi[a-f0-9]{32}(?:-\d)?\b", ("dapi",)),
    Rule("azure-storage-key", r"(?i)AccountKey=([A-Za-z0-9+/=]{40,200})", ("accountkey=",)),
    Rule("azure-client-secret", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}", ("q~",)),
    Rule("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", ("age-secret-key-1",)),
    Rule("vault-token", r"\bhv[sb]\.[A-Za-z0-9_-]{24,300}", ("hvs.", "hvb.")),
    Rule("doppler-token", r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}", ("dp.",)),
    Rule("linear-key", r"\blin_(?:api|oauth)_[A-Za-z0-9]{40}", ("lin_",)),
    Rule("pulumi-token", r"\bpul-[a-f0-9]{40}", ("pul-",)),
    Rule("sentry-token", r"\bsntry[us]_[A-Za-z0-9+/=_]{40,400}", ("sntry",)),
    Rule("grafana-token", r"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", ("glsa_",)),
    Rule("atlassian-token", r"\bATATT3[A-Za-z0-9_=-]{100,300}", ("atatt3",)),
    Rule("postman-key", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}", ("pmak-",)),
    Rule("newrelic-key", r"\bNR(?:AK|JS|II)-[A-Za-z0-9]{19,32}", ("nrak-", "nrjs-", "nrii-")),
    Rule("planetscale-token", r"\bpscale_(?:tkn|oauth|pw)_[A-Za-z0-9_.=-]{32,64}", ("pscale_",)),
    Rule("rubygems-key", r"\brubygems_[a-f0-9]{48}", ("rubygems_",)),
    Rule("clojars-token", r"(?i)\bCLOJARS_[a-z0-9]{60}", ("clojars_",)),
    Rule("onepassword-token", r"\bops_eyJ[A-Za-z0-9+/]{100,}={0,3}", ("ops_eyj",)),
    Rule("openshift-token", r"\bsha256~[A-Za-z0-9_-]{43}", ("sha256~",)),
    Rule("perplexity-key", r"\bpplx-[A-Za-z0-9]{48}", ("pplx-",)),
    Rule("groq-key", r"\bgsk_[A-Za-z0-9]{52}", ("gsk_",)),
    Rule("replicate-token", r"\br8_[A-Za-z0-9]{37}", ("r8_",)),
    Rule("flyio-token", r"\bf(?:o1|m1[ar]|m2)_[A-Za-z0-9+/_-]{40,}", ("fo1_", "fm1", "fm2_")),
    # Prefixed tokens gitleaks finds only next to their service's name.
    Rule("defined-networking-token", r"\bdnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}", ("dnkey-",)),
    Rule("gocardless-token", r"\blive_[A-Za-z0-9_=-]{40}\b", ("live_",)),
    Rule("lob-key", r"\b(?:live|test)_(?:pub_[a-f0-9]{31}|[a-f0-9]{35})\b", ("live_", "test_")),
    Rule("typeform-token", r"\btfp_[A-Za-z0-9_.=-]{59}", ("tfp_",)),
    Rule("cloudflare-ca-key", r"\bv1\.0-[a-f0-9]{24}-[a-f0-9]{146}", ("v1.0-",)),
    Rule("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}(?:\.[A-Za-z0-9_-]*)?", ("eyj",)),
    # A PEM block wrapped in base64 (kubeconfig's client-key-data) and a bare DER key body.
    Rule("private-key", r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]{20,}", ("ls0tls1crudjti",)),
    Rule("private-key", r"\bMII[A-Za-z0-9+/]{60,}={0,2}", ("mii",)),
)
