#!/usr/bin/env node
// cimdprovider.mjs - an OAuth authorization server built on oidc-provider with
// its Client ID Metadata Document feature on: a client_id that is an https URL
// is resolved by fetching the document at that URL (draft-ietf-oauth-client-id-
// metadata-document), with oidc-provider's own validation, caching and redirect
// URI rules. No client is registered beforehand and there is no dynamic
// registration.
//
// The Go end-to-end tests log the aggregator in with it: the aggregator's
// gateway serves the document over https, the login names its URL as the
// client_id, and the access token (a JWT for the MCP server named by the
// resource parameter) is then sent to that server.
//
// Usage: node cimdprovider.mjs
// It listens on 127.0.0.1 (a free port) and prints one JSON line,
// {"issuer": "http://127.0.0.1:PORT"}. The user is alice, who approves every
// request at once (there is no login page). Every client ID metadata document
// it fetched is printed on stderr as a line "fetched URL status CACHE-CONTROL".
//
// The fetch hook lifts oidc-provider's refusal of special-use addresses, which
// would otherwise refuse the gateway on 127.0.0.1: a test has nothing else.
// The gateway's certificate is trusted through NODE_EXTRA_CA_CERTS.

import http from 'node:http';
import { generateKeyPair, exportJWK } from 'jose';
import Provider from 'oidc-provider';

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), alg: 'RS256', use: 'sig', kid: 'test' };

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  features: {
    devInteractions: { enabled: false },
    clientIdMetadataDocument: { enabled: true, ack: 'draft-02' },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => ({
        scope: 'mcp',
        audience: resource,
        accessTokenTTL: 3600,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  scopes: ['openid', 'offline_access'],
  pkce: { required: () => true },
  findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  fetch: async (url, options) => {
    delete options.dispatcher; // see the header
    const response = await fetch(url, options);
    process.stderr.write(`fetched ${url} ${response.status} ${response.headers.get('cache-control')}\n`);
    return response;
  },
});
provider.proxy = false;

// The interaction: alice logs in and grants what the provider says is missing.
async function interaction(req, res) {
  const { prompt: { details }, params, grantId: existing } = await provider.interactionDetails(req, res);
  const grant = existing
    ? await provider.Grant.find(existing)
    : new provider.Grant({ accountId: 'alice', clientId: params.client_id });
  if (details.missingOIDCScope) {
    grant.addOIDCScope(details.missingOIDCScope.join(' '));
  }
  if (details.missingOIDCClaims) {
    grant.addOIDCClaims(details.missingOIDCClaims);
  }
  for (const [indicator, scopes] of Object.entries(details.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { login: { accountId: 'alice' }, consent: { grantId } }, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((err) => {
      process.stderr.write(`interaction failed: ${err}\n`);
      res.statusCode = 500;
      res.end(String(err));
    });
    return;
  }
  callback(req, res);
});
provider.on('server_error', (_ctx, err) => process.stderr.write(`server_error: ${err.stack}\n`));
provider.on('authorization.error', (_ctx, err) => process.stderr.write(`authorization.error: ${err.message} ${err.error_description || ''}\n`));
provider.on('grant.error', (_ctx, err) => process.stderr.write(`grant.error: ${err.message} ${err.error_description || ''}\n`));

process.stdout.write(`${JSON.stringify({ issuer })}\n`);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
