// The scheduler's JSON API as the dashboard uses it: the bearer token (from the address bar's
// fragment, the sign-in form, or localStorage), errors as values worth telling apart, and the
// live event stream.

const kTokenKey = 'tessera.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;  // 0: the scheduler could not be reached
    this.code = code;      // the API's error code: "unauthenticated", "permission_denied", ...
  }
  // Worth retrying while the page keeps what it last showed.
  get transient() {
    return this.status === 0 || this.status >= 500;
  }
}

export function token() {
  try {
    return localStorage.getItem(kTokenKey) || '';
  } catch {
    return '';
  }
}

export function setToken(value) {
  try {
    if (value) localStorage.setItem(kTokenKey, value);
    else localStorage.removeItem(kTokenKey);
  } catch {
    // Storage disabled (private mode): the token lives only as long as the page.
  }
}

// A link `http://host:8470/#token=tsra-...` (or `#/jobs/4?token=...`) signs in: the token moves
// to localStorage and out of the address bar, so it does not linger in history or screenshots.
export function adoptTokenFromUrl() {
  const hash = location.hash.slice(1);
  const match = hash.match(/(^|[?&])token=([^&]*)/);
  if (!match) return false;
  setToken(decodeURIComponent(match[2]));
  let rest = hash.slice(0, match.index) + (match[1] === '?' ? '?' : '') +
             hash.slice(match.index + match[0].length).replace(/^&/, '');
  rest = rest.replace(/[?&]$/, '');
  history.replaceState(null, '', location.pathname + location.search + '#' + (rest || '/jobs'));
  return true;
}

function headers(extra) {
  const h = {...extra};
  const t = token();
  if (t) h.Authorization = 'Bearer ' + t;
  return h;
}

async function errorFrom(res) {
  let code = '';
  let message = `HTTP ${res.status}`;
  try {
    const body = await res.json();
    code = body.code || '';
    message = body.error || message;
  } catch {
    // Not the API's JSON (a proxy's error page): the status says enough.
  }
  return new ApiError(res.status, code, message);
}

// Fetches `path`; resolves with the parsed JSON (or the Response when `raw`), rejects with an
// ApiError.
export async function api(path, {method = 'GET', body, raw = false, signal, accept} = {}) {
  const extra = {};
  if (body !== undefined) extra['Content-Type'] = 'application/json';
  if (accept) extra.Accept = accept;
  let res;
  try {
    res = await fetch(path, {
      method,
      headers: headers(extra),
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      signal,
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'unreachable', 'cannot reach the scheduler');
  }
  if (!res.ok) throw await errorFrom(res);
  return raw ? res : res.json();
}

// Like api(), but an endpoint this scheduler does not have (404) resolves to null, so a page can
// fall back to what it can derive from older endpoints.
export async function optional(path) {
  try {
    return await api(path);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}

// A file fetched with the token (an <img src>, a <video src> or an <a download> cannot send
// one), as an object URL the caller revokes.
export async function fileUrl(path) {
  const res = await api(path, {raw: true});
  return URL.createObjectURL(await res.blob());
}

export const imageUrl = fileUrl;

// One Server-Sent Events block ("id: 3\nevent: job\ndata: {...}") as {id, kind, data}.
function parseEvent(block) {
  let kind = 'message';
  let id = null;
  const data = [];
  for (const line of block.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') kind = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id') id = value;
  }
  if (!data.length) return null;
  let payload = {};
  try {
    payload = JSON.parse(data.join('\n'));
  } catch {
    // A line the page cannot read still says that something changed.
  }
  return {id, kind: payload.kind || kind, data: payload};
}

// Follows GET /api/v1/events with fetch (EventSource cannot send the token). Calls onOpen once
// the stream is accepted and onEvent for each event; resolves when the server ends the stream,
// rejects with an ApiError when it cannot start (404 on schedulers without it).
export async function followEvents({onOpen, onEvent, signal, lastEventId}) {
  const extra = {Accept: 'text/event-stream'};
  if (lastEventId) extra['Last-Event-ID'] = lastEventId;
  let res;
  try {
    res = await fetch('/api/v1/events', {headers: headers(extra), cache: 'no-store', signal});
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'unreachable', 'cannot reach the scheduler');
  }
  if (!res.ok) throw await errorFrom(res);
  const type = res.headers.get('Content-Type') || '';
  if (!res.body || !type.startsWith('text/event-stream')) {
    throw new ApiError(415, 'unsupported', 'the events endpoint did not answer with a stream');
  }
  onOpen();
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buffer += value;
    // Blocks end with a blank line; "\r\n" line ends are allowed by the SSE format.
    buffer = buffer.replace(/\r\n/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = parseEvent(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (event) onEvent(event);
    }
  }
}
