import { createHash, randomBytes } from 'node:crypto';

/** Makes a planrun key recognisable in a config file, a log line or a secret scanner. */
export const API_KEY_PREFIX = 'prk_';

/** 32 random bytes in base64url: 43 characters after the prefix. */
const API_KEY_LENGTH = API_KEY_PREFIX.length + 43;

/** How much of a key listings show, so an operator can match a key they hold to its row. */
const DISPLAY_LENGTH = API_KEY_PREFIX.length + 8;

export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

/**
 * The stored form of a key. One round of SHA-256 is enough here, unlike for passwords: a
 * key is 256 random bits, so nobody holding the table can guess their way to a preimage,
 * and a slow hash (bcrypt, scrypt) would only slow down every authenticated request.
 */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** Whether `value` has the shape of a planrun key (cheap, so junk is refused before hashing). */
export function looksLikeApiKey(value: string): boolean {
  return value.length === API_KEY_LENGTH && value.startsWith(API_KEY_PREFIX);
}

/** The leading part of a key that listings may show. */
export function displayPrefix(key: string): string {
  return key.slice(0, DISPLAY_LENGTH);
}
