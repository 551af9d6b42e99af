import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, ApiErrorCode } from './errors.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Checks on a request's headers that no JSON schema can make, run after authentication
 * and before the body is read:
 *
 * - A body is UTF-8 JSON (RFC 8259): a `charset` other than UTF-8 is refused with 415
 *   rather than read as UTF-8 and misunderstood.
 * - A body is sent as is: any `Content-Encoding` but `identity` is refused with 415 (and
 *   `Accept-Encoding: identity`, RFC 7694). Bodies are small JSON; inflating them would
 *   only let a small request grow to the body limit on the server.
 * - `Idempotency-Key` comes once: two headers would otherwise reach the route joined into
 *   one key, "a1, a2". Node reads header bytes as latin1; the key's bytes are read again as
 *   UTF-8, so a key means the same text here as in a batch body or a queue message id.
 *   Bytes that are not UTF-8 are refused with 400.
 */
export function checkRequestHeaders(app: FastifyInstance): void {
  app.addHook('preParsing', async (request, reply, payload) => {
    checkCharset(request.headers['content-type']);
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && encoding.split(',').some((coding) => !['', 'identity'].includes(coding.trim().toLowerCase()))) {
      void reply.header('accept-encoding', 'identity');
      throw new ApiError(415, ApiErrorCode.unsupportedMediaType, `Content-Encoding "${encoding}" is not supported: send the body uncompressed`);
    }
    readIdempotencyKey(request);
    return payload;
  });
}

function checkCharset(contentType: string | undefined): void {
  for (const parameter of contentType?.split(';').slice(1) ?? []) {
    const [name = '', value = ''] = parameter.split('=', 2).map((part) => part.trim());
    if (name.toLowerCase() !== 'charset') continue;
    const charset = value.replace(/^"(.*)"$/, '$1');
    if (!['utf-8', 'utf8'].includes(charset.toLowerCase())) {
      throw new ApiError(415, ApiErrorCode.unsupportedMediaType, `charset "${charset}" is not supported: bodies are UTF-8`);
    }
  }
}

function readIdempotencyKey(request: FastifyRequest): void {
  // rawHeaders: name, value, name, value... as received, one pair per header line.
  const raw = request.raw.rawHeaders;
  const sent = raw.filter((value, i) => i % 2 === 1 && raw[i - 1]!.toLowerCase() === 'idempotency-key');
  if (sent.length === 0) return;
  if (sent.length > 1) throw new ApiError(400, ApiErrorCode.invalidRequest, `send one Idempotency-Key header, not ${sent.length}`);
  try {
    request.headers['idempotency-key'] = utf8.decode(Buffer.from(sent[0]!, 'latin1'));
  } catch {
    throw new ApiError(400, ApiErrorCode.invalidRequest, 'the Idempotency-Key header must be UTF-8 text');
  }
}
