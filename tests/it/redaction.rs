//! The redaction corpus: fake credentials of many kinds, each placed in
//! every part of a Claude and a Codex session (user text, assistant text,
//! tool input, tool output, thinking, a file path, the title, Claude's
//! truncating `last-prompt`), captured with the real binary; afterwards no
//! git object may hold any of them. A corpus of ordinary code and ids that
//! merely name secrets must come through intact (at most 2 % altered).
//!
//! The secrets are generated here from templates with a fixed seed, so no
//! token-shaped string is committed to the repository.
//! `REDACTION_TABLE=1 cargo test --test it redaction_corpus -- --nocapture`
//! prints the recall/precision table published in docs/redaction.md.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::support::{Repo, text};

/// A kind of secret: a name for the table, a template for the secret and
/// the sentences it appears in (`{S}` is the secret).
struct Kind {
    name: &'static str,
    template: &'static str,
    contexts: &'static [&'static str],
}

/// Template fields: `{a:N}` alphanumerics, `{h:N}` lower hex, `{H:N}`
/// upper hex, `{u:N}` upper alphanumerics, `{l:N}` lower letters, `{m:N}`
/// letters, `{d:N}` digits, `{b:N}` base64, `{w:N}` URL-safe, `{7:N}`
/// base32 upper, `{c:N}` bech32 upper.
const KINDS: &[Kind] = &[
    Kind {
        name: "aws-access-key-id",
        template: "AKIA{7:16}",
        contexts: &[
            "export AWS_ACCESS_KEY_ID={S}",
            "my key id is {S} in us-east-1",
            "aws_access_key_id = {S}",
        ],
    },
    Kind {
        name: "aws-secret-access-key",
        template: "{b:40}",
        contexts: &[
            "aws_secret_access_key = {S}",
            "export AWS_SECRET_ACCESS_KEY={S}",
        ],
    },
    Kind {
        name: "github-pat",
        template: "ghp_{a:36}",
        contexts: &[
            "export GITHUB_TOKEN={S}",
            "git push https://{S}@github.com/acme/app.git",
            "use token {S} for the API",
        ],
    },
    Kind {
        name: "github-oauth",
        template: "gho_{a:36}",
        contexts: &["the oauth token {S} expired", "GITHUB_OAUTH={S}"],
    },
    Kind {
        name: "github-fine-grained",
        template: "github_pat_{a:22}_{a:59}",
        contexts: &["GH_TOKEN={S} gh pr list", "fine-grained token: {S}"],
    },
    Kind {
        name: "gitlab-pat",
        template: "glpat-{w:20}",
        contexts: &[
            "curl --header \"PRIVATE-TOKEN: {S}\" https://gitlab.example.com/api/v4/projects",
            "token {S}",
        ],
    },
    Kind {
        name: "stripe-live",
        template: "sk_live_{a:24}",
        contexts: &["stripe.api_key = \"{S}\"", "STRIPE_SECRET_KEY={S}"],
    },
    Kind {
        name: "stripe-restricted",
        template: "rk_live_{a:24}",
        contexts: &[
            "restricted key {S} for the webhook",
            "STRIPE_RESTRICTED_KEY={S}",
        ],
    },
    Kind {
        name: "openai",
        template: "sk-proj-{w:74}T3BlbkFJ{w:74}",
        contexts: &[
            "export OPENAI_API_KEY={S}",
            "client = OpenAI(api_key=\"{S}\")",
        ],
    },
    Kind {
        name: "anthropic",
        template: "sk-ant-api03-{w:93}AA",
        contexts: &["ANTHROPIC_API_KEY={S} claude", "my key: {S}"],
    },
    Kind {
        name: "slack-bot",
        template: "xoxb-{d:12}-{d:12}-{a:24}",
        contexts: &["SLACK_BOT_TOKEN={S}", "slack token {S}"],
    },
    Kind {
        name: "slack-user",
        template: "xoxp-{d:12}-{d:12}-{d:12}-{h:32}",
        contexts: &["user token {S}", "SLACK_USER_TOKEN={S}"],
    },
    Kind {
        name: "slack-webhook",
        template: "https://hooks.slack.com/services/T{u:8}/B{u:10}/{a:24}",
        contexts: &["post alerts to {S}", "webhook_url: {S}"],
    },
    Kind {
        name: "discord-webhook",
        template: "https://discord.com/api/webhooks/{d:18}/{w:68}",
        contexts: &["send the build status to {S}", "DISCORD_WEBHOOK_URL={S}"],
    },
    Kind {
        name: "discord-bot",
        template: "M{a:25}.{w:6}.{w:38}",
        contexts: &["the discord bot token is {S}", "DISCORD_TOKEN={S}"],
    },
    Kind {
        name: "telegram-bot",
        template: "{d:10}:AA{w:33}",
        contexts: &[
            "telegram bot {S} posts to the channel",
            "TELEGRAM_BOT_TOKEN={S}",
        ],
    },
    Kind {
        name: "npm",
        template: "npm_{a:36}",
        contexts: &["//registry.npmjs.org/:_authToken={S}", "npm token {S}"],
    },
    Kind {
        name: "pypi",
        template: "pypi-AgEIcHlwaS5vcmc{w:64}",
        contexts: &["twine upload -u __token__ -p {S} dist/*", "password = {S}"],
    },
    Kind {
        name: "huggingface",
        template: "hf_{m:34}",
        contexts: &["huggingface-cli login --token {S}", "HF_TOKEN={S}"],
    },
    Kind {
        name: "digitalocean",
        template: "dop_v1_{h:64}",
        contexts: &["doctl auth init -t {S}", "DIGITALOCEAN_TOKEN={S}"],
    },
    Kind {
        name: "sendgrid",
        template: "SG.{w:22}.{w:43}",
        contexts: &["SENDGRID_API_KEY={S}", "sendgrid key {S}"],
    },
    Kind {
        name: "twilio",
        template: "SK{h:32}",
        contexts: &["twilio api key {S}", "TWILIO_API_KEY={S}"],
    },
    Kind {
        name: "heroku-v2",
        template: "HRKU-AA{w:58}",
        contexts: &["heroku auth token {S}", "HEROKU_API_KEY={S}"],
    },
    Kind {
        name: "heroku-uuid",
        template: "{h:8}-{h:4}-4{h:3}-a{h:3}-{h:12}",
        contexts: &["HEROKU_API_KEY={S}", "heroku_api_key: \"{S}\""],
    },
    Kind {
        name: "shopify",
        template: "shpat_{h:32}",
        contexts: &["shopify admin token {S}", "X-Shopify-Access-Token: {S}"],
    },
    Kind {
        name: "shopify-secret",
        template: "shpss_{h:32}",
        contexts: &["shared secret {S}", "SHOPIFY_API_SECRET={S}"],
    },
    Kind {
        name: "mailgun",
        template: "key-{h:32}",
        contexts: &["MAILGUN_API_KEY={S}", "mailgun key {S}"],
    },
    Kind {
        name: "google-api-key",
        template: "AIza{w:35}",
        contexts: &["maps key {S} in index.html", "GOOGLE_API_KEY={S}"],
    },
    Kind {
        name: "google-oauth-secret",
        template: "GOCSPX-{w:28}",
        contexts: &["client secret {S}", "GOOGLE_CLIENT_SECRET={S}"],
    },
    Kind {
        name: "jwt",
        template: "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{w:48}.{w:43}",
        contexts: &["Authorization: Bearer {S}", "session cookie {S}"],
    },
    Kind {
        name: "rsa-private-key",
        template: "-----BEGIN RSA PRIVATE KEY-----\n{b:64}\n{b:64}\n{b:64}\n-----END RSA PRIVATE KEY-----",
        contexts: &["here is the key:\n{S}\nuse it"],
    },
    Kind {
        name: "openssh-private-key",
        template: "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA{b:40}\n{b:70}\n{b:70}\n-----END OPENSSH PRIVATE KEY-----",
        contexts: &["cat ~/.ssh/id_ed25519\n{S}"],
    },
    Kind {
        name: "pgp-private-key",
        template: "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF{b:58}\n{b:64}\n{b:64}\n-----END PGP PRIVATE KEY BLOCK-----",
        contexts: &["gpg --export-secret-keys --armor\n{S}"],
    },
    Kind {
        name: "ec-private-key-cut",
        template: "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI{b:55}\n{b:64}",
        contexts: &["the file starts with\n{S}"],
    },
    Kind {
        name: "postgres-url",
        template: "{a:16}",
        contexts: &[
            "DATABASE_URL=postgres://app:{S}@db.internal:5432/prod",
            "psql postgresql://admin:{S}@10.0.0.5/app",
        ],
    },
    Kind {
        name: "mongodb-url",
        template: "{a:14}",
        contexts: &[
            "mongodb+srv://admin:{S}@cluster0.x1y2z.mongodb.net/db",
            "MONGO_URI=\"mongodb://root:{S}@mongo:27017\"",
        ],
    },
    Kind {
        name: "redis-url",
        template: "{a:20}",
        contexts: &[
            "REDIS_URL=redis://:{S}@cache:6379/0",
            "redis-cli -u redis://default:{S}@redis.example.com:6380",
        ],
    },
    Kind {
        name: "https-userinfo",
        template: "{a:12}",
        contexts: &[
            "git clone https://deploy:{S}@git.example.com/acme/app.git",
            "pip install --index-url https://__token__:{S}@pypi.example.com/simple pkg",
        ],
    },
    Kind {
        name: "curl-user",
        template: "{a:12}",
        contexts: &[
            "curl -u admin:{S} https://api.example.com/v1/items",
            "curl --user 'ci:{S}' https://ci.example.com/api",
        ],
    },
    Kind {
        name: "env-secret-key",
        template: "{a:40}",
        contexts: &[
            "SECRET_KEY={S}",
            "ENCRYPTION_KEY={S}",
            "PRIVATE_KEY={S}",
            "export JWT_SECRET={S}",
        ],
    },
    Kind {
        name: "password-short",
        template: "{l:5}{d:2}",
        contexts: &["password={S}", "mysql -u root -p{S} prod", "--password {S}"],
    },
    Kind {
        name: "password-symbols",
        template: "P@{a:5}!#{d:2}",
        contexts: &["password={S}", "DB_PASSWORD={S}", "db_password: \"{S}\""],
    },
    Kind {
        name: "json-password-field",
        template: "{a:10}",
        contexts: &[
            "{\"username\": \"admin\", \"password\": \"{S}\"}",
            "{\"client_id\": \"app\", \"client_secret\": \"{S}\"}",
        ],
    },
    Kind {
        name: "azure-storage",
        template: "{b:86}==",
        contexts: &[
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={S};EndpointSuffix=core.windows.net",
        ],
    },
    Kind {
        name: "bearer-header",
        template: "{w:40}",
        contexts: &["Authorization: Bearer {S}", "-H 'Authorization: token {S}'"],
    },
    Kind {
        name: "api-key-header",
        template: "{a:32}",
        contexts: &["X-API-Key: {S}", "x-api-key={S}"],
    },
    Kind {
        name: "doppler",
        template: "dp.pt.{a:43}",
        contexts: &["DOPPLER_TOKEN={S}"],
    },
    Kind {
        name: "linear",
        template: "lin_api_{a:40}",
        contexts: &["linear key {S}", "LINEAR_API_KEY={S}"],
    },
    Kind {
        name: "age-secret-key",
        template: "AGE-SECRET-KEY-1{c:58}",
        contexts: &["# created: 2026-01-01\n{S}"],
    },
    Kind {
        name: "vault",
        template: "hvs.{w:95}",
        contexts: &["VAULT_TOKEN={S}", "vault login {S}"],
    },
    Kind {
        name: "databricks",
        template: "dapi{h:32}",
        contexts: &["databricks token {S}", "DATABRICKS_TOKEN={S}"],
    },
    Kind {
        name: "sentry",
        template: "sntryu_{h:64}",
        contexts: &["SENTRY_AUTH_TOKEN={S}"],
    },
    Kind {
        name: "planetscale",
        template: "pscale_tkn_{w:43}",
        contexts: &["pscale token {S}"],
    },
    Kind {
        name: "grafana",
        template: "glsa_{a:32}_{h:8}",
        contexts: &["grafana service account {S}"],
    },
    Kind {
        name: "alibaba",
        template: "LTAI{a:20}",
        contexts: &["alibaba access key {S}", "ALIBABA_CLOUD_ACCESS_KEY_ID={S}"],
    },
    Kind {
        name: "postman",
        template: "PMAK-{h:24}-{h:34}",
        contexts: &["postman key {S}"],
    },
    Kind {
        name: "dynatrace",
        template: "dt0c01.{u:24}.{a:64}",
        contexts: &["dynatrace token {S}"],
    },
];

/// Ordinary code, ids and text that name secrets without holding one.
const NON_SECRETS: &[&str] = &[
    "let token = get();",
    "let token = self.tokens.next()?;",
    "password: String,",
    "pub fn verify_password(password: &str) -> bool {",
    "fn api_key(&self) -> Option<&str> { self.api_key.as_deref() }",
    "const API_KEY_HEADER: &str = \"x-api-key\";",
    "secret_name = \"prod-db\"",
    "max_tokens: 4096",
    "\"input_tokens\": 1234, \"cache_read_input_tokens\": 56789",
    "token_count = len(tokens)",
    "for token in tokens:",
    "refresh_token_expiry: 3600",
    "550e8400-e29b-41d4-a716-446655440000",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b4b0b822cd15d6c15b0f00a08",
    "commit 3a7bd3e2360a3d29eea436fcfb7e44c735d117c4",
    "sha1: 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12",
    ".sk-button { color: red; } .sk-modal-backdrop { opacity: 0.5; }",
    "import { getToken, refreshToken } from './auth';",
    "const password = process.env.DB_PASSWORD;",
    "if token == \"\" { return Err(Error::MissingToken); }",
    "def login(username, password):",
    "self.api_key = api_key",
    "client.login(username=user, password=password)",
    "headers = {\"Authorization\": f\"Bearer {token}\"}",
    "AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "password_hash = bcrypt.hashpw(pw, salt)",
    "SECRET_KEY = os.environ[\"SECRET_KEY\"]",
    "export PATH=$HOME/bin:$PATH",
    "kubectl create secret generic db-creds --from-file=./creds.json",
    "The token budget is 32000 tokens; the model counts them with a tokenizer.",
    "Use the --token flag to pass a token.",
    "ssh-keygen -t ed25519 -f ~/.ssh/id_ed25519 -C ci@example.com",
    "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----",
    "assert_eq!(config.token, None);",
    "{\"type\": \"tool_use\", \"id\": \"toolu_01A09q90qw90lq917835lq9\", \"name\": \"Bash\"}",
    "msg_01XFDUDYJgAACzvnptvVoYEL",
    "{\"session_id\": \"01a22641-1298-70e1-90e6-4b6faeb436bb\"}",
    "checksum = \"a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90\"",
    "npm install --save @octokit/auth-token",
    "hf_hub_download(repo_id=\"bert-base-uncased\", filename=\"config.json\")",
    "npm_config_cache=/tmp/.npm npm ci",
    "const tokenizer = new Tokenizer(\"cl100k_base\");",
    "private_key_path = \"/home/dev/.ssh/id_rsa\"",
    "Set up passwordless sudo for the deploy user.",
    "\"password\": {\"type\": \"string\", \"minLength\": 8}",
    "<input type=\"password\" name=\"password\" autocomplete=\"current-password\">",
    "git clone git@github.com:acme/app.git",
    "https://github.com/acme/app/pull/42#issuecomment-1234567890",
    "postgres://localhost:5432/mydb",
    "redis://localhost:6379/0",
    "password=$DB_PASSWORD",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "API_KEY=<your-api-key>",
    "SECRET_KEY=changeme",
    "let key = map.get(&id)?;",
    "primary_key: id",
    "jwt.decode(token, key, algorithms=[\"HS256\"])",
    "echo aGVsbG8gd29ybGQ= | base64 -d",
    "export NODE_ENV=production",
    "export AUTH_DOMAIN=example.auth0.com",
    "PASSWORD_MIN_LENGTH=12",
    "MAX_TOKENS=4096",
    "DISABLE_AUTH=true",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
    "git log --format=%H -n 1 | xargs git show --stat",
    "cargo test --release -- --nocapture",
    "The secret to fast builds is caching the target directory.",
];

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick(&mut self, alphabet: &[u8]) -> char {
        alphabet[(self.next() % alphabet.len() as u64) as usize] as char
    }
}

fn generate(template: &str, rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let field = &rest[open + 1..open + close];
        let Some((class, n)) = field.split_once(':') else {
            out.push_str(&rest[..=open]);
            rest = &rest[open + 1..];
            continue;
        };
        out.push_str(&rest[..open]);
        let alphabet: &[u8] = match class {
            "a" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            "h" => b"0123456789abcdef",
            "H" => b"0123456789ABCDEF",
            "u" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
            "l" => b"abcdefghijklmnopqrstuvwxyz",
            "m" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
            "d" => b"0123456789",
            "b" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
            "w" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
            "7" => b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
            "c" => b"QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
            other => panic!("unknown class {other}"),
        };
        for _ in 0..n.parse::<usize>().unwrap() {
            out.push(rng.pick(alphabet));
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// One secret in one sentence.
struct Case {
    kind: &'static str,
    secret: String,
    sentence: String,
}

fn kind_of(name: &str) -> &'static Kind {
    KINDS.iter().find(|k| k.name == name).unwrap()
}

fn corpus() -> Vec<Case> {
    let mut rng = Rng(0x5EC2_E75E_55A1_0017);
    let mut cases = Vec::new();
    for kind in KINDS {
        for context in kind.contexts {
            let secret = generate(kind.template, &mut rng);
            cases.push(Case {
                kind: kind.name,
                sentence: context.replace("{S}", &secret),
                secret,
            });
        }
    }
    cases
}

/// What must not be stored of a secret: the secret, and each long line of
/// a multi-line one (a key block's body).
fn needles(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_owned()];
    if secret.contains('\n') {
        out.extend(
            secret
                .lines()
                .filter(|l| l.len() >= 12 && !l.starts_with("-----"))
                .map(str::to_owned),
        );
    }
    out
}

fn uuid(n: usize, salt: u32) -> String {
    format!("{salt:08x}-0000-4000-8000-{n:012x}")
}

/// Writes a Claude session holding `sentence` everywhere a secret can be.
fn claude_session(dir: &Path, cwd: &str, n: usize, sentence: &str, cut: usize) {
    let id = uuid(n, 0xc1a0de00);
    let ts = "2026-01-01T00:00:00.000Z";
    let common = |uuid: String, parent: Option<String>| {
        json!({"parentUuid": parent, "isSidechain": false, "uuid": uuid, "timestamp": ts,
               "cwd": cwd, "sessionId": id, "version": "2.1.332", "userType": "external"})
    };
    let mut user = common(format!("{id}-u"), None);
    user["type"] = json!("user");
    user["message"] = json!({"role": "user", "content": sentence});
    let mut assistant = common(format!("{id}-a"), Some(format!("{id}-u")));
    assistant["type"] = json!("assistant");
    assistant["message"] = json!({
        "id": format!("msg_{n:020}"), "type": "message", "role": "assistant", "model": "claude-opus-5-5",
        "content": [
            {"type": "thinking", "thinking": format!("The user gave me this: {sentence}"), "signature": "RXVzaWduYXR1cmUtb3BhcXVlLWJsb2I="},
            {"type": "text", "text": format!("I will use it: {sentence}")},
            {"type": "tool_use", "id": format!("toolu_{n:020}a"), "name": "Bash", "input": {"command": sentence, "description": "run it"}},
            {"type": "tool_use", "id": format!("toolu_{n:020}b"), "name": "Read", "input": {"file_path": format!("/work/project/{sentence}/notes.md")}},
        ],
        "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 20},
    });
    let mut result = common(format!("{id}-r"), Some(format!("{id}-a")));
    result["type"] = json!("user");
    result["message"] = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": format!("toolu_{n:020}a"), "content": format!("output:\n{sentence}\n")},
        {"type": "tool_result", "tool_use_id": format!("toolu_{n:020}b"), "content": sentence},
    ]});
    let title = json!({"type": "custom-title", "customTitle": sentence, "sessionId": id});
    let prefix: String = sentence.chars().take(cut).collect();
    let last = json!({"type": "last-prompt", "lastPrompt": prefix, "leafUuid": format!("{id}-r"), "sessionId": id});
    let body: String = [user, assistant, result, title, last]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.join(format!("{id}.jsonl")), body).unwrap();
}

/// Writes a Codex rollout holding `sentence` everywhere a secret can be.
fn codex_session(dir: &Path, cwd: &str, n: usize, sentence: &str) {
    let id = uuid(n, 0xc0de0000);
    let ts = "2026-01-01T00:00:00.000Z";
    let line = |ordinal: usize, kind: &str, payload: Value| json!({"timestamp": ts, "ordinal": ordinal, "type": kind, "payload": payload});
    let args =
        serde_json::to_string(&json!({"cmd": sentence, "workdir": format!("/work/{sentence}")}))
            .unwrap();
    let lines = [
        line(
            0,
            "session_meta",
            json!({"id": id, "session_id": id, "timestamp": ts, "cwd": cwd, "originator": "codex_exec", "cli_version": "0.171.0", "source": "exec"}),
        ),
        line(
            1,
            "event_msg",
            json!({"type": "thread_name_updated", "thread_id": id, "thread_name": sentence}),
        ),
        line(
            2,
            "response_item",
            json!({"type": "message", "id": format!("msg_u{n}"), "role": "user", "content": [{"type": "input_text", "text": sentence}]}),
        ),
        line(
            3,
            "response_item",
            json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [{"type": "summary_text", "text": format!("Thinking about {sentence}")}], "content": null, "encrypted_content": "gAAAAABopaque-ciphertext-the-api-gave"}),
        ),
        line(
            4,
            "response_item",
            json!({"type": "message", "id": format!("msg_a{n}"), "role": "assistant", "content": [{"type": "output_text", "text": format!("Done with {sentence}"), "annotations": []}], "phase": "final_answer"}),
        ),
        line(
            5,
            "response_item",
            json!({"type": "function_call", "id": format!("fc_{n}"), "name": "exec_command", "arguments": args, "call_id": format!("call_{n}")}),
        ),
        line(
            6,
            "response_item",
            json!({"type": "function_call_output", "call_id": format!("call_{n}"), "output": format!("Process exited with code 0\nOutput:\n{sentence}\n")}),
        ),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(
        dir.join(format!("rollout-2026-01-01T00-00-00-{id}.jsonl")),
        body,
    )
    .unwrap();
}

fn all_objects(repo: &Repo) -> String {
    text(
        &repo
            .git_in(&repo.root)
            .args(["cat-file", "--batch-all-objects", "--batch"])
            .output()
            .unwrap()
            .stdout,
    )
}

/// Captures `sentences` as one Claude and one Codex session each; returns
/// what git holds afterwards.
fn capture_all(repo: &Repo, sentences: &[(String, usize)]) -> String {
    let root = repo.root.to_str().unwrap().to_owned();
    let projects = repo
        .home
        .join(".claude/projects")
        .join(git_session_adapters::claude::project_dir_name(&root));
    std::fs::create_dir_all(&projects).unwrap();
    let codex_home = repo.outside("codex-home");
    let rollouts = codex_home.join("sessions/2026/01/01");
    std::fs::create_dir_all(&rollouts).unwrap();
    for (n, (sentence, cut)) in sentences.iter().enumerate() {
        claude_session(&projects, &root, n, sentence, *cut);
        codex_session(&rollouts, &root, n, sentence);
    }
    let out = repo
        .session()
        .env("CODEX_HOME", &codex_home)
        .args(["import", "--home", repo.home.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let refs = repo.git(&["for-each-ref", "refs/sessions/"]);
    assert_eq!(
        refs.lines().count(),
        2 * sentences.len(),
        "every session is captured: {refs}"
    );
    all_objects(repo)
}

#[test]
#[allow(clippy::print_stdout)] // the table, when asked for
fn redaction_corpus_leaves_no_secret_in_any_object() {
    let cases = corpus();
    let kinds: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.kind).collect();
    assert!(cases.len() >= 100, "{} secrets", cases.len());
    assert!(kinds.len() >= 40, "{} kinds", kinds.len());
    let repo = Repo::new();
    // Claude's last-prompt keeps the start of a prompt: cut it in the
    // middle of the secret, leaving at least 12 of its characters.
    let sentences: Vec<(String, usize)> = cases
        .iter()
        .map(|c| {
            let at = c.sentence.find(&c.secret).unwrap();
            let keep = (c.secret.chars().count() / 2).max(12);
            (c.sentence.clone(), c.sentence[..at].chars().count() + keep)
        })
        .collect();
    let objects = capture_all(&repo, &sentences);
    let mut leaked: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut per_kind: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for c in &cases {
        let cut: String = c
            .secret
            .chars()
            .take((c.secret.chars().count() / 2).max(12))
            .collect();
        let mut found: Vec<String> = needles(&c.secret)
            .into_iter()
            .filter_map(|n| {
                let at = objects.find(n.as_str())?;
                let from = objects.floor_char_boundary(at.saturating_sub(80));
                let to = objects.ceil_char_boundary((at + n.len() + 20).min(objects.len()));
                Some(objects[from..to].to_owned())
            })
            .collect();
        // The cut start of a token is a leak when the token is one field
        // (a webhook's or a JWT's start is not secret).
        let one_field = kind_of(c.kind).template.matches('{').count() == 1;
        if one_field
            && !c.secret.contains('\n')
            && cut.len() >= 12
            && objects.contains(cut.as_str())
        {
            found.push(format!("(cut) {cut}"));
        }
        let entry = per_kind.entry(c.kind).or_default();
        entry.0 += 1;
        if found.is_empty() {
            entry.1 += 1;
        } else {
            leaked.entry(c.kind).or_default().extend(found);
        }
    }
    if std::env::var_os("REDACTION_TABLE").is_some() {
        println!("| kind | secrets | redacted |\n| --- | --- | --- |");
        for (kind, (n, ok)) in &per_kind {
            println!("| {kind} | {n} | {ok} |");
        }
    }
    assert!(
        leaked.is_empty(),
        "secrets reached git objects: {leaked:#?}"
    );
    // The agents' own resume still has what it needs: the sessions verify
    // and the Codex reasoning ciphertext and Claude signature are intact.
    repo.ok(&["verify"]);
    assert!(objects.contains("gAAAAABopaque-ciphertext-the-api-gave"));
    assert!(objects.contains("RXVzaWduYXR1cmUtb3BhcXVlLWJsb2I="));
}

#[test]
#[allow(clippy::print_stdout)] // the list, when asked for
fn redaction_corpus_keeps_code_that_merely_names_secrets() {
    assert!(NON_SECRETS.len() >= 50, "{}", NON_SECRETS.len());
    let repo = Repo::new();
    let sentences: Vec<(String, usize)> = NON_SECRETS
        .iter()
        .map(|s| (s.to_string(), s.chars().count()))
        .collect();
    let objects = capture_all(&repo, &sentences);
    let altered: Vec<&str> = NON_SECRETS
        .iter()
        .copied()
        .filter(|s| {
            let escaped = serde_json::to_string(s).unwrap();
            !objects.contains(&escaped[1..escaped.len() - 1])
        })
        .collect();
    if std::env::var_os("REDACTION_TABLE").is_some() {
        println!(
            "non-secrets: {} of {} altered: {altered:#?}",
            altered.len(),
            NON_SECRETS.len()
        );
    }
    assert!(
        altered.len() * 50 <= NON_SECRETS.len(),
        "more than 2 % of ordinary code was altered: {altered:#?}"
    );
}

#[test]
fn canonical_import_append_and_titles_are_redacted() {
    let repo = Repo::new();
    let mut rng = Rng(7);
    let secret = generate("ghp_{a:36}", &mut rng);
    let password = generate("{a:12}", &mut rng);
    let mut header = crate::support::header("canon-1");
    header["header"]["title"] = json!(format!("fix login, token {secret}"));
    let mut event = crate::support::event(0);
    event["payload"] = json!({"text": format!("export GITHUB_TOKEN={secret}"),
                              "input": {"password": password}});
    let path = repo.write_jsonl("canon.jsonl", &[header, event]);
    repo.import(&path);
    let extra = repo.write_jsonl(
        "more.jsonl",
        &[
            json!({"ts": "2026-01-01T00:00:01Z", "agent": "claude", "actor": "user",
                  "type": "message.user", "level": 0,
                  "payload": {"text": format!("psql postgres://app:{password}@db/x")}}),
        ],
    );
    repo.ok(&["append", "canon-1", extra.to_str().unwrap()]);
    let objects = all_objects(&repo);
    assert!(!objects.contains(&secret), "the token reached git");
    assert!(!objects.contains(&password), "the password reached git");
    let listed = repo.ok(&["list"]);
    assert!(listed.contains("[REDACTED:"), "{listed}");
    repo.ok(&["verify"]);
    // Importing the same file again finds it already stored.
    repo.import(&path);
}

#[test]
fn redact_check_lists_what_the_current_rules_find_without_printing_it() {
    let repo = Repo::new();
    let mut rng = Rng(11);
    let secret = generate("glpat-{w:20}", &mut rng);
    let sentence = format!("the deploy token is {secret}");
    // Stored without redaction, as before a rule existed.
    repo.git(&["config", "session.redact", "false"]);
    capture_all(&repo, &[(sentence.clone(), sentence.len())]);
    let out = repo.session().args(["redact", "--check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("header  gitlab-pat ×1"), "{stdout}");
    assert!(stdout.contains("seq "), "{stdout}");
    assert!(!stdout.contains(&secret) && !text(&out.stderr).contains(&secret));
    assert!(
        text(&out.stderr).contains("rotate"),
        "{}",
        text(&out.stderr)
    );
    // One session by prefix; and without --check it refuses.
    let claude = uuid(0, 0xc1a0de00);
    let one = repo
        .session()
        .args(["redact", "--check", &claude[..12]])
        .output()
        .unwrap();
    assert_eq!(one.status.code(), Some(1));
    assert!(text(&one.stdout).lines().all(|l| l.starts_with(&claude)));
    repo.fails(&["redact"], 2);
    // Redacted when stored: nothing to report.
    let clean = Repo::new();
    capture_all(&clean, &[(sentence.clone(), sentence.len())]);
    clean.ok(&["redact", "--check"]);
}
