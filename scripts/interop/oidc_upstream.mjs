// A real authorization server in front of a protected MCP upstream, for
// scripts/interop/oidc_check.sh: npm's oidc-provider (OpenID Certified) on 127.0.0.1
// with Dynamic Client Registration, PKCE, resource indicators (RFC 8707, JWT access
// tokens whose audience is the resource) and refresh tokens on; and a resource server
// that serves Protected Resource Metadata, checks each request's token against the
// provider's keys (signature, issuer, audience, expiry) and forwards good ones to an
// MCP endpoint (mcpx example-server).
//
//   OIDC_DIR=DIR node oidc_upstream.mjs AS_PORT RS_PORT UPSTREAM_URL TOKEN_TTL_SECONDS
//
// DIR is where oidc-provider is installed (DIR/node_modules).
//
// GET http://127.0.0.1:RS_PORT/_counts answers {"token": N, "refresh": M}: the token
// requests the provider served (refresh grants among them).
import http from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(`${process.env.OIDC_DIR}/package.json`);
const { default: Provider } = await import(require.resolve('oidc-provider'));
const { createRemoteJWKSet, jwtVerify } = await import(require.resolve('jose'));

const [asPort, rsPort, upstreamUrl, ttlArg] = process.argv.slice(2);
const ttl = Number(ttlArg);
const issuer = `http://127.0.0.1:${asPort}`;
const resource = `http://127.0.0.1:${rsPort}/mcp`;
const counts = { token: 0, refresh: 0 };

const provider = new Provider(issuer, {
  features: {
    registration: { enabled: true },
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource) throw new Error(`unknown resource ${indicator}`);
        return { scope: 'mcp', audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'jwt' };
      },
    },
  },
  scopes: ['openid', 'offline_access', 'mcp'],
  pkce: { required: () => true },
  // A refresh token for every client allowed the grant, offline_access or not.
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: { AccessToken: ttl, RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600 },
});
provider.proxy = false;
provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && ctx.path === '/token') {
    counts.token += 1;
  }
  await next();
});
provider.on('grant.success', (ctx) => {
  if (ctx.oidc.params?.grant_type === 'refresh_token') counts.refresh += 1;
});
provider.listen(Number(asPort), '127.0.0.1');

const jwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));
const prm = `http://127.0.0.1:${rsPort}/.well-known/oauth-protected-resource/mcp`;

http
  .createServer(async (req, res) => {
    if (req.url === '/_counts') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify(counts));
    }
    if (req.url === '/.well-known/oauth-protected-resource/mcp') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ resource, authorization_servers: [issuer], scopes_supported: ['mcp'] }));
    }
    if (!req.url.startsWith('/mcp')) {
      res.writeHead(404);
      return res.end();
    }
    const auth = req.headers.authorization || '';
    try {
      if (!auth.startsWith('Bearer ')) throw new Error('no token');
      await jwtVerify(auth.slice(7), jwks, { issuer, audience: resource });
    } catch (e) {
      res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${prm}", scope="mcp"` });
      return res.end(String(e.message || e));
    }
    const headers = { ...req.headers };
    delete headers.authorization;
    delete headers.host;
    const up = http.request(new URL(upstreamUrl), { method: req.method, headers }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      ur.pipe(res);
    });
    up.on('error', (e) => {
      res.writeHead(502);
      res.end(String(e));
    });
    req.pipe(up);
  })
  .listen(Number(rsPort), '127.0.0.1');
console.error(`oidc-provider at ${issuer}; protected upstream at ${resource}`);
