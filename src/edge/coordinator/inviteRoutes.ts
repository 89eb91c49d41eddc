/**
 * The two HTTP routes of invites (coordinator/invites.ts): `POST /invites`, where the operator asks
 * for one (operator key), and `POST /join`, where a joiner on another machine redeems it. `/join`
 * needs no key at the edge: the invite in its body is the credential, checked here, and the answer
 * holds nothing a stranger could use (URLs and the coordinator's public key, which the invite
 * already carries).
 */
import { AmfError } from '../../errors.js';
import { bodyValidator, validBody } from '../../http/bodyValidator.js';
import { readJsonObject, sendJson, type Router } from '../../http/httpKit.js';
import {
  DEFAULT_INVITE_TTL_SECONDS,
  mintInvite,
  parseInviteTtl,
  parseJoinRequest,
  redeemInvite,
  type InviteDeps,
} from '../../coordinator/invites.js';
import type { LogFn } from '../../log.js';
import type { PolicyNotices } from '../../registry/policyNotices.js';
import { BoundedCache } from '../../util/boundedCache.js';
import { INVITE_BODY_SCHEMA, JOIN_BODY_SCHEMA, type InviteBody, type JoinBody } from '../routeBodySchemas.js';

const MAX_BODY_BYTES = 16 * 1024;
const checkInviteBody = bodyValidator<InviteBody>(INVITE_BODY_SCHEMA);
const checkJoinBody = bodyValidator<JoinBody>(JOIN_BODY_SCHEMA);

export interface InviteRouteOptions extends InviteDeps {
  notices: PolicyNotices;
  log: LogFn;
}

/** One `join_refused` warning per source address per window: a flood of bad joins is not an event flood. */
const WARN_WINDOW_MS = 10_000;

export function registerInviteRoutes(router: Router, options: InviteRouteOptions): void {
  const warned = new BoundedCache<true>(10_000, WARN_WINDOW_MS);
  router.on('POST', '/invites', async (req, res) => {
    const body = validBody(checkInviteBody, await readJsonObject(req, MAX_BODY_BYTES));
    const ttlSeconds = body.ttl === undefined ? DEFAULT_INVITE_TTL_SECONDS : parseInviteTtl(String(body.ttl));
    const { token, claims } = mintInvite(options, body.tags ?? [], ttlSeconds);
    // The token itself is a secret until redeemed: its id is logged, never the token.
    options.log('info', 'invite issued', {
      invite: claims.id,
      tags: claims.tags,
      expires_at: claims.expiresAt,
    });
    sendJson(res, 201, {
      invite: token,
      id: claims.id,
      tags: claims.tags,
      expires_at: claims.expiresAt.toISOString(),
      coordinator_url: claims.coordinatorUrl,
      nats_url: claims.natsUrl,
    });
  });
  router.on('POST', '/join', async (req, res) => {
    // The schema checks the body's structure; parseJoinRequest the key's checksum and the tags.
    const request = parseJoinRequest({
      ...validBody(checkJoinBody, await readJsonObject(req, MAX_BODY_BYTES)),
    });
    let claims;
    try {
      claims = await redeemInvite(options, request);
    } catch (err) {
      // Refused joins are seen by the operator: a stolen or replayed invite shows up here.
      const source = req.socket.remoteAddress ?? 'unknown';
      if (err instanceof AmfError && warned.get(source) === undefined) {
        warned.set(source, true);
        options.notices.warn({
          reason: 'join_refused',
          message: `join of ${request.name} (key ${request.nkey}) refused: ${err.message}`,
          details: { source, ...(err.details ?? {}) },
        });
      }
      throw err;
    }
    options.log('info', 'invite redeemed', { invite: claims.id, agent: request.name, nkey: request.nkey });
    sendJson(res, 200, {
      coordinator_url: claims.coordinatorUrl,
      nats_url: claims.natsUrl,
      coordinator_key: claims.coordinatorKey,
      tags: request.tags,
    });
  });
}
