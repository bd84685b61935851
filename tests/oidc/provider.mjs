// A real OpenID Connect provider for Baton's single sign-on tests: panva's oidc-provider
// (certified), on a loopback port, with the people and groups of a JSON file that the
// tests rewrite between sign-ins (read afresh at every sign-in, as a directory would be).
//
// Environment:
//   OIDC_USERS          the JSON file: {"alice": {"password", "email", "given_name",
//                       "family_name", "groups": [...], "roles": [...]}, ...}
//   OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URI   Baton, its only client
//   OIDC_AUDIENCE       the audience of its access tokens (JWTs): Baton's API
//
// It listens on a port the system picks and prints "ready <issuer>" once it serves.
// Its sign-in page is its own (oidc-provider's development pages load web fonts from
// elsewhere); consent is taken as given, as for a company's own application.

import { generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";

import Provider from "oidc-provider";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const usersFile = env("OIDC_USERS");
const audience = env("OIDC_AUDIENCE");
const scopes = "openid email profile groups";

const people = () => JSON.parse(readFileSync(usersFile, "utf8"));

const escape = (text) =>
  String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(res, status, body) {
  res.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "content-security-policy": "default-src 'none'; form-action 'self' http://localhost:* http://127.0.0.1:*",
  });
  res.end(`<!doctype html><html lang="en"><head><title>Test provider sign-in</title></head>
<body>${body}</body></html>`);
}

function loginForm(res, uid, error = "") {
  page(res, 200, `<h1>Test provider</h1>${error ? `<p role="alert">${escape(error)}</p>` : ""}
<form method="post" action="/interaction/${escape(uid)}/login">
<label>Provider username <input name="login" autocomplete="username"></label>
<label>Provider password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Sign in to the provider</button></form>`);
}

async function formBody(req) {
  let text = "";
  for await (const chunk of req) text += chunk;
  return Object.fromEntries(new URLSearchParams(text));
}

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: "jwk" }), kid: "test-key", use: "sig", alg: "RS256" };

let provider;

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const uid = details.uid;
  if (req.method === "GET") {
    if (details.prompt.name === "login") return loginForm(res, uid);
    return consent(req, res, details);
  }
  const { login, password } = await formBody(req);
  const person = people()[login];
  if (!person || person.password !== password) {
    return loginForm(res, uid, "Unknown username or wrong password.");
  }
  await provider.interactionFinished(req, res, { login: { accountId: login } }, {
    mergeWithLastSubmission: false,
  });
}

async function consent(req, res, details) {
  const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
  grant.addOIDCScope(scopes);
  grant.addResourceScope(audience, scopes);
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

const server = createServer((req, res) => {
  if (req.url.startsWith("/interaction/")) {
    interaction(req, res).catch((error) => {
      console.error(error);
      page(res, 500, `<p>${escape(error.message)}</p>`);
    });
    return;
  }
  provider.callback()(req, res);
});

server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = new Provider(issuer, {
    clients: [
      {
        client_id: env("OIDC_CLIENT_ID"),
        client_secret: env("OIDC_CLIENT_SECRET"),
        redirect_uris: [env("OIDC_REDIRECT_URI")],
        token_endpoint_auth_method: "client_secret_post",
        grant_types: ["authorization_code"],
        response_types: ["code"],
      },
    ],
    jwks: { keys: [signingKey] },
    cookies: { keys: ["tests-only-cookie-key"] },
    claims: {
      openid: ["sub"],
      email: ["email", "email_verified"],
      profile: ["preferred_username", "given_name", "family_name", "name"],
      groups: ["groups", "roles"],
    },
    // The ID token carries every claim granted, as Entra ID's and Keycloak's can: the
    // access tokens are the API's, which the userinfo endpoint does not take.
    conformIdTokenClaims: false,
    async findAccount(ctx, sub) {
      const person = people()[sub];
      if (!person) return undefined;
      return {
        accountId: sub,
        async claims() {
          return {
            sub,
            preferred_username: sub,
            email: person.email,
            email_verified: true,
            given_name: person.given_name,
            family_name: person.family_name,
            name: `${person.given_name} ${person.family_name}`,
            groups: person.groups ?? [],
            roles: person.roles ?? [],
          };
        },
      };
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => audience,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: scopes,
          audience,
          accessTokenFormat: "jwt",
          accessTokenTTL: 3600,
          jwt: { sign: { alg: "RS256" } },
        }),
      },
    },
    // Access tokens name their account as Keycloak's and Entra ID's do.
    extraTokenClaims: (ctx, token) => ({ preferred_username: token.accountId }),
    async loadExistingGrant(ctx) {
      const grantId = ctx.oidc.result?.consent?.grantId
        || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (grantId) return ctx.oidc.provider.Grant.find(grantId);
      const grant = new ctx.oidc.provider.Grant({
        accountId: ctx.oidc.session.accountId,
        clientId: ctx.oidc.client.clientId,
      });
      grant.addOIDCScope(scopes);
      grant.addResourceScope(audience, scopes);
      await grant.save();
      return grant;
    },
  });
  provider.on("server_error", (ctx, error) => console.error("server_error", error));
  console.log(`ready ${issuer}`);
});

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
