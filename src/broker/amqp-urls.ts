/**
 * A RabbitMQ cluster's addresses in one string: URLs separated by commas
 * (`amqp://u:p@a:5672,amqp://u:p@b:5672`), or one URL naming several hosts that share its
 * credentials, vhost and query (`amqp://u:p@a:5672,b:5672,c:5672/vhost`), or a mix. A comma
 * inside a password is written `%2C`, as in any URL.
 */
export function parseAmqpUrls(spec: string): string[] {
  const pieces = spec.split(',').map((piece) => piece.trim());
  if (pieces.some((piece) => piece === '')) throw new TypeError(`an empty address in the RabbitMQ URL list "${redactedList(spec)}"`);
  const groups: string[][] = [];
  for (const piece of pieces) {
    if (hasScheme(piece)) groups.push([piece]);
    else if (groups.length > 0) groups.at(-1)!.push(piece);
    else throw new TypeError(`the RabbitMQ URL list must start with amqp:// or amqps:// (got "${redacted(piece)}")`);
  }
  return groups.flatMap(expandHosts).map(requireAmqpUrl);
}

/** `amqp://u:p@a,b:5673/vh?x=1` → one URL per host, each with the group's credentials, path and query. */
function expandHosts(group: string[]): string[] {
  if (group.length === 1) return group;
  const match = /^(amqps?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/i.exec(group.join(','));
  if (!match) throw new TypeError(`cannot read the hosts of "${redacted(group[0]!)}"`);
  const [, scheme, userInfo = '', hosts, rest] = match;
  const split = hosts!.split(',');
  // The hosts part ends at the first "/", so a path or query written after an earlier host is refused.
  if (split.length !== group.length || split.some((host) => host === '')) {
    throw new TypeError(`in "${redacted(group[0]!)},…" only the last host may be followed by a vhost or query`);
  }
  return split.map((host) => `${scheme}${userInfo}${host}${rest}`);
}

function requireAmqpUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`not a URL: "${redacted(url)}"`);
  }
  if (parsed.protocol !== 'amqp:' && parsed.protocol !== 'amqps:') throw new TypeError(`not an amqp:// or amqps:// URL: "${redacted(url)}"`);
  if (parsed.hostname === '') throw new TypeError(`no host in "${redacted(url)}"`);
  return url;
}

function hasScheme(piece: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(piece);
}

/** The URL without its password, for error messages and logs. */
export function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.includes('@') ? '(an unparseable URL)' : url;
  }
}

/** Every URL of a list without its password. */
export function redactedList(spec: string): string {
  return spec
    .split(',')
    .map((piece) => (hasScheme(piece.trim()) ? redacted(piece.trim()) : piece.trim().replace(/^[^@]*@/, '')))
    .join(',');
}
