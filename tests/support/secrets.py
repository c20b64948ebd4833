"""One fake secret of each shape veriscale redacts, built at run time (no literal key sits in the repo).

    for kind, text, secret in SHAPES: ...     # text holds secret; redacted, it holds [redacted:kind]
    PLANTED                                   # every text in one string, for a store's prompt or trajectory
"""

from __future__ import annotations

_BODY = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4"  # 48 mixed characters


def _(*parts: str) -> str:
    return "".join(parts)


_PEM = _("-----BEGIN RSA ", "PRIVATE KEY-----\nMIIEow", _BODY, "\n", _BODY[::-1], "==\n-----END RSA ", "PRIVATE KEY-----")

#: (kind, text around the secret, the secret)
SHAPES: list[tuple[str, str, str]] = [
    (kind, text.format(s=secret), secret) for kind, text, secret in [
        ("openai-key", "export OPENAI_API_KEY={s}; run", _("sk-", _BODY)),
        ("openai-key", "client = OpenAI(key='{s}')", _("sk-", "proj-", _BODY, "_x-", _BODY[:20])),
        ("anthropic-key", "ANTHROPIC_API_KEY={s} claude", _("sk-", "ant-", "api03-", _BODY, _BODY[:40])),
        ("github-token", "git clone https://{s}@github.com/o/r", _("ghp", "_", _BODY[:36])),
        ("github-token", "GH_TOKEN {s} set", _("gho", "_", _BODY[4:40])),
        ("github-token", "pat {s} end", _("github", "_pat_", "11ABCDEFG0", _BODY[:12], "_", _BODY)),
        ("aws-access-key-id", "aws_access_key_id = {s}", _("AKIA", "Q3EGRIJ2NOTREAL7")),
        ("aws-secret-key", "aws_secret_access_key = {s}", _("wJalrXUtnFEMI/K7MDENG/", "bPxRfiCYNOTREALKEY")),
        ("slack-token", "SLACK_BOT_TOKEN: {s}", _("xox", "b-", "123456789012-", "123456789012-", _BODY[:24])),
        ("google-api-key", "maps?key={s}&q=x", _("AIza", "SyD", _BODY[:32])),
        ("hf-token", "huggingface-cli login --token {s}", _("hf", "_", _BODY[:34])),
        ("jwt", "cookie session={s};", _("eyJ", "hbGciOiJIUzI1NiJ9", ".", "eyJ", "zdWIiOiIxMjM0NTY3ODkwIn0", ".",
                                         "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")),
        ("bearer-token", "curl -H 'Authorization: Bearer {s}' https://api", _("abcDEF123456", "ghiJKL789mno")),
        ("private-key", "wrote key.pem:\n{s}\nthen chmod 600", _PEM),
        ("secret", '{{"api_key": "{s}"}}', _("Zx9", _BODY[:20])),
        ("secret", "password={s}", _("Hunter2", "Hunter2", "Hunter2!")),
        ("secret", "db token: {s} (staging)", _("9f8e7d6c", "5b4a3928", "1706f5e4")),
    ]
]

KINDS = sorted({kind for kind, _t, _s in SHAPES})
PLANTED = "\n".join(text for _k, text, _s in SHAPES)
SECRETS = [secret for _k, _t, secret in SHAPES]

#: Text that looks like key material but is not a secret: it must pass unchanged.
ORDINARY = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "id 123e4567-e89b-12d3-a456-426614174000 and md5 5d41402abc4b2a76b9719d911017c592",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "Authorization: Bearer $OPENAI_API_KEY", "api_key=os.environ['OPENAI_API_KEY']", "token = <your-token-here>",
    "password: ********************", "prompt_tokens: 12345678901234567", "max_tokens=4096",
    "the task-scheduler-service-name-is-long", "sk-learn-is-not-a-key-but-is-long", "hf_hub_download(repo_id)",
    "-----BEGIN CERTIFICATE-----\nMIIB", "the token limit is 128000 and the secret is patience",
]
