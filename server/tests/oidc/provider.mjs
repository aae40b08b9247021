// The OpenID provider the web tests sign in with: the certified
// `oidc-provider` package (panva), on 127.0.0.1 and a port the system
// picks. It prints one JSON line, {"issuer": "http://127.0.0.1:<port>"},
// and exits when its standard input closes (the test binary ended).
//
// What a test drives:
// - clients register through the provider's own dynamic registration
//   (POST /reg, RFC 7591), one per test, so tests running side by side
//   share nothing;
// - sign-in is a one-field form at /interaction/<uid> (the email is the
//   account; an email whose local part starts with "unverified" has
//   email_verified false); consent is granted without a page;
// - POST /test/tamper {client_id, claims, remove, key} changes the next ID
//   token the token endpoint gives that client, signed again by this
//   provider: with its own key, with a fresh key it then publishes in its
//   JWKS ("fresh": a key rotation), or with a key it never publishes
//   ("unpublished"). The rest of the token response is the provider's.
import http from 'node:http';
import { generateKeyPair, exportJWK, SignJWT, decodeJwt, decodeProtectedHeader } from 'jose';
import Provider from 'oidc-provider';

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

async function newKey(kid) {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const pub = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  const priv = { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
  return { privateKey, pub, priv };
}

const main = await newKey('main-1');
const published = []; // public keys added by a rotation
const tampers = new Map(); // client_id -> what to change in its next ID token
let keys = 0;

const provider = new Provider(issuer, {
  jwks: { keys: [main.priv] },
  async findAccount(_ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          email: id,
          email_verified: !id.split('@')[0].startsWith('unverified'),
          name: id.split('@')[0].replace(/[._-]/g, ' '),
        };
      },
    };
  },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  // The profile claims go into the ID token too (as Okta, Entra ID, Google
  // and Keycloak put them there for the code flow).
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
  },
  pkce: { required: () => true },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  // Consent is granted without a page: every client is first-party here.
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) {
      return ctx.oidc.provider.Grant.find(grantId);
    }
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile');
    await grant.save();
    return grant;
  },
  cookies: { keys: ['gatehouse-test-provider-cookie-key'] },
});

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

function escape(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

provider.use(async (ctx, next) => {
  const m = ctx.path.match(/^\/interaction\/([^/]+)$/);
  if (m && ctx.method === 'GET') {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    ctx.type = 'html';
    ctx.body = `<!doctype html><html><head><title>Test provider sign-in</title></head><body>
<h1>Sign in to the test provider</h1><p>Client ${escape(details.params.client_id)}</p>
<form method="post" action="/interaction/${escape(m[1])}">
<label>Email <input type="email" name="email" id="email" required></label>
<button type="submit" id="continue">Continue</button></form></body></html>`;
    return;
  }
  if (m && ctx.method === 'POST') {
    const email = new URLSearchParams(await readBody(ctx.req)).get('email') || '';
    const to = await provider.interactionResult(
      ctx.req,
      ctx.res,
      { login: { accountId: email.trim() } },
      { mergeWithLastSubmission: false },
    );
    ctx.redirect(to);
    return;
  }
  if (ctx.path === '/test/tamper' && ctx.method === 'POST') {
    const t = JSON.parse(await readBody(ctx.req));
    tampers.set(t.client_id, t);
    ctx.body = { ok: true };
    return;
  }
  await next();
  if (ctx.path === '/jwks' && ctx.status === 200 && ctx.body?.keys) {
    ctx.body = { keys: [...ctx.body.keys, ...published] };
  }
  if (ctx.path === '/token' && ctx.status === 200 && ctx.body?.id_token) {
    const clientId = ctx.oidc?.client?.clientId;
    const t = clientId && tampers.get(clientId);
    if (t) {
      tampers.delete(clientId);
      const claims = { ...decodeJwt(ctx.body.id_token), ...(t.claims || {}) };
      for (const k of t.remove || []) delete claims[k];
      let key = { privateKey: main.privateKey, kid: decodeProtectedHeader(ctx.body.id_token).kid };
      if (t.key === 'fresh' || t.key === 'unpublished') {
        keys += 1;
        const k = await newKey(`${t.key}-${keys}`);
        if (t.key === 'fresh') published.push(k.pub);
        key = { privateKey: k.privateKey, kid: k.pub.kid };
      }
      ctx.body = {
        ...ctx.body,
        id_token: await new SignJWT(claims)
          .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'JWT' })
          .sign(key.privateKey),
      };
    }
  }
});

server.on('request', provider.callback());
process.stdout.write(`${JSON.stringify({ issuer })}\n`);
process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.resume();
