import { PassThrough } from 'node:stream';
import type { CDPSession } from 'playwright-core';
import type { Tenant } from '../../commands/consumer.ts';
import type { HostedMerchant } from '../../events/hosted-connect.ts';
import type { BrowserSession } from '../adapters/browser/worker.ts';
import type { Ports } from './context.ts';

// What a person sees and does through a hosted-connect live view (spec 4.16):
// the open context's DevTools-protocol screencast (Page.startScreencast → the
// latest JPEG frame, pushed to viewers over SSE) and their clicks and keys,
// forwarded with Input.dispatchMouseEvent / Input.insertText /
// Input.dispatchKeyEvent. The viewer's page reports its size (`resize`), and
// the remote page is laid out at that size (a phone sees the merchant's page
// as a phone would, one CSS pixel to one). The context's lifecycle is
// hosted-browser.ts.

export type Frame = { seq: number; image: string; width: number; height: number; url: string; title: string };
export type Viewer = (event: 'frame' | 'ended', data: unknown) => void;

export type Live = {
  deps: Ports;
  tenant: Tenant;
  merchant: HostedMerchant;
  sessionId: string;
  contextId: string;
  session: BrowserSession;
  cdp: CDPSession;
  viewKey: string;
  /** SHA-256 of the cookie of the browser that first opened the live view: only that browser may watch and type. */
  viewerKey: string | undefined;
  frame: Frame | undefined;
  title: string;
  viewers: Set<Viewer>;
  state: 'open' | 'finishing' | 'ended';
  inputs: Promise<void>;
  idle: NodeJS.Timeout | undefined;
  lifetime: NodeJS.Timeout;
  /** When the lifetime ends (ms since the epoch). */
  endsAt: number;
  /** Where the person goes back to once connected (validated at start: https, or http on loopback); shown on the end state. */
  returnUrl: string | undefined;
  /** Its claims in browser_owners: the session and the live view. */
  keys: string[];
  /** A viewer came or went, or an input arrived: the idle deadline moves (hosted-browser.ts). */
  touch: () => void;
};

/** How long a title lookup may take before the last known title stands (a page stuck in a dialog). */
const TITLE_READ_MS = 10_000;

function withTimeout<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<T>((r) => (timer = setTimeout(() => r(fallback), ms)))]).finally(() => clearTimeout(timer));
}

export function publish(live: Live, f: Frame): void {
  if (live.state === 'ended') return;
  if (live.frame && live.frame.seq > f.seq) return; // a late title lookup must not replace a newer frame
  live.frame = f;
  for (const v of live.viewers) v('frame', f);
}

/** Starts the context's screencast: each frame goes to the viewers. */
export async function startScreencast(live: Live): Promise<void> {
  const { session, cdp } = live;
  let seq = 0;
  // A frame goes out at once, with the title known so far; the page's title is
  // then read behind it and, if it changed (a navigation), the latest frame goes
  // out again with it. A slow title lookup (a busy machine) never holds a frame
  // back, and never leaves the view on a stale title when no later frame comes.
  let titleRead: Promise<void> | undefined;
  let titleAgain = false;
  const refreshTitle = (): void => {
    if (titleRead) {
      titleAgain = true;
      return;
    }
    titleRead = (async () => {
      do {
        titleAgain = false;
        const title = await withTimeout(session.page.title().catch(() => live.title), TITLE_READ_MS, live.title);
        if (title !== live.title) {
          live.title = title;
          if (live.frame) publish(live, { ...live.frame, seq: ++seq, url: session.page.url(), title });
        }
      } while (titleAgain && live.state !== 'ended');
    })().finally(() => (titleRead = undefined));
  };
  cdp.on('Page.screencastFrame', (f: { data: string; sessionId: number; metadata: { deviceWidth?: number; deviceHeight?: number } }) => {
    void cdp.send('Page.screencastFrameAck', { sessionId: f.sessionId }).catch(() => {});
    const vp = session.page.viewportSize();
    publish(live, { seq: ++seq, image: `data:image/jpeg;base64,${f.data}`, width: f.metadata.deviceWidth ?? vp?.width ?? 1280, height: f.metadata.deviceHeight ?? vp?.height ?? 720, url: session.page.url(), title: live.title });
    refreshTitle();
  });
  await screencastAt(live, session.page.viewportSize() ?? { width: 1280, height: 720 });
}

const screencastAt = (live: Live, vp: { width: number; height: number }) => live.cdp.send('Page.startScreencast', { format: 'jpeg', quality: 70, maxWidth: vp.width, maxHeight: vp.height, everyNthFrame: 1 }).catch(() => {});

/** The viewer's size, within these bounds (CSS px): a phone held either way up to a large desktop window. */
export const VIEW_BOUNDS = { minWidth: 240, maxWidth: 1920, minHeight: 240, maxHeight: 2160 } as const;

/** Lays the remote page out at the viewer's size; the screencast follows. */
async function resizeView(live: Live, width: number, height: number): Promise<void> {
  const w = Math.round(Math.min(Math.max(width, VIEW_BOUNDS.minWidth), VIEW_BOUNDS.maxWidth));
  const h = Math.round(Math.min(Math.max(height, VIEW_BOUNDS.minHeight), VIEW_BOUNDS.maxHeight));
  const now = live.session.page.viewportSize();
  if (now && now.width === w && now.height === h) return;
  await live.session.page.setViewportSize({ width: w, height: h });
  await live.cdp.send('Page.stopScreencast').catch(() => {});
  await screencastAt(live, { width: w, height: h });
}

/** A live-view SSE stream: the latest frame at once, then each new one; `ended` when the context closes. */
export function openViewerStream(live: Live, onClose: (f: () => void) => void): PassThrough {
  const out = new PassThrough();
  let done = false;
  const viewer: Viewer = (event, data) => {
    if (done) return;
    out.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    if (event === 'ended') stop();
  };
  const heartbeat = setInterval(() => {
    if (!done) out.write(': heartbeat\n\n');
  }, 15_000);
  const stop = () => {
    if (done) return;
    done = true;
    clearInterval(heartbeat);
    live.viewers.delete(viewer);
    live.touch(); // the last viewer gone: the idle deadline starts now
    out.end();
  };
  live.viewers.add(viewer);
  live.touch(); // a watching person keeps the context open
  onClose(stop);
  out.write(': open\n\n');
  if (live.frame) viewer('frame', live.frame);
  else
    void (async () => {
      // No screencast frame yet (nothing painted since start): one screenshot stands in.
      const shot = (await live.cdp.send('Page.captureScreenshot', { format: 'jpeg', quality: 70 }).catch(() => undefined)) as { data: string } | undefined;
      const vp = live.session.page.viewportSize() ?? { width: 1280, height: 720 };
      if (shot && !live.frame) publish(live, { seq: 0, image: `data:image/jpeg;base64,${shot.data}`, width: vp.width, height: vp.height, url: live.session.page.url(), title: await withTimeout(live.session.page.title().catch(() => ''), 1_000, '') });
    })();
  return out;
}

export const SPECIAL_KEYS = {
  Enter: { code: 'Enter', vk: 13, text: '\r' },
  Tab: { code: 'Tab', vk: 9, text: undefined },
  Backspace: { code: 'Backspace', vk: 8, text: undefined },
  Delete: { code: 'Delete', vk: 46, text: undefined },
  Escape: { code: 'Escape', vk: 27, text: undefined },
  ArrowLeft: { code: 'ArrowLeft', vk: 37, text: undefined },
  ArrowUp: { code: 'ArrowUp', vk: 38, text: undefined },
  ArrowRight: { code: 'ArrowRight', vk: 39, text: undefined },
  ArrowDown: { code: 'ArrowDown', vk: 40, text: undefined },
  Home: { code: 'Home', vk: 36, text: undefined },
  End: { code: 'End', vk: 35, text: undefined },
} as const;
export type SpecialKey = keyof typeof SPECIAL_KEYS;

export type Input = { type: 'click'; x: number; y: number } | { type: 'scroll'; x: number; y: number; dy: number } | { type: 'text'; text: string } | { type: 'key'; key: SpecialKey } | { type: 'resize'; width: number; height: number };

/** Forwards one input to the remote page, in arrival order (x, y are fractions of the frame). */
export function forwardInput(live: Live, input: Input): Promise<void> {
  live.touch();
  const run = async () => {
    if (live.state === 'ended') return;
    const vp = live.session.page.viewportSize() ?? { width: 1280, height: 720 };
    const w = live.frame?.width ?? vp.width;
    const h = live.frame?.height ?? vp.height;
    const send = (method: string, params: Record<string, unknown>) => live.cdp.send(method as 'Input.dispatchMouseEvent', params as never);
    switch (input.type) {
      case 'click': {
        const at = { x: Math.round(input.x * w), y: Math.round(input.y * h) };
        await send('Input.dispatchMouseEvent', { type: 'mouseMoved', ...at });
        await send('Input.dispatchMouseEvent', { type: 'mousePressed', ...at, button: 'left', buttons: 1, clickCount: 1 });
        await send('Input.dispatchMouseEvent', { type: 'mouseReleased', ...at, button: 'left', buttons: 0, clickCount: 1 });
        return;
      }
      case 'scroll':
        await send('Input.dispatchMouseEvent', { type: 'mouseWheel', x: Math.round(input.x * w), y: Math.round(input.y * h), deltaX: 0, deltaY: input.dy });
        return;
      case 'text':
        await send('Input.insertText', { text: input.text });
        return;
      case 'resize':
        await resizeView(live, input.width, input.height);
        return;
      case 'key': {
        const k = SPECIAL_KEYS[input.key];
        const base = { key: input.key, code: k.code, windowsVirtualKeyCode: k.vk, nativeVirtualKeyCode: k.vk };
        await send('Input.dispatchKeyEvent', { type: k.text ? 'keyDown' : 'rawKeyDown', ...base, ...(k.text ? { text: k.text, unmodifiedText: k.text } : {}) });
        await send('Input.dispatchKeyEvent', { type: 'keyUp', ...base });
        return;
      }
    }
  };
  const p = live.inputs.then(run, run);
  live.inputs = p.catch(() => {});
  return p;
}
