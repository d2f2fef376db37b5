import { createRequire } from 'node:module';
import * as grpc from '@grpc/grpc-js';
import { EsdbLog, type LogRecord, type Expected, type Matcher, type Proposed, AppendRefused } from './log.ts';

// A protocol-level EventStoreDB double: a gRPC server on loopback built from
// the generated code that ships inside @eventstore/db-client, answering the
// calls the official client makes (server features, Read on a stream and on
// $all with filters and subscriptions, Append, BatchAppend). The semantics
// live in log.ts; this file is the wire. docs/eventstoredb.md lists where
// each behaviour comes from and what could not be confirmed.

const require = createRequire(import.meta.url);
/* eslint-disable @typescript-eslint/no-explicit-any */
const gen = (m: string) => require(`@eventstore/db-client/generated/${m}`);
const streamsGrpc = gen('streams_grpc_pb.js');
const streamsPb = gen('streams_pb.js');
const sharedPb = gen('shared_pb.js');
const featuresGrpc = gen('serverfeatures_grpc_pb.js');
const featuresPb = gen('serverfeatures_pb.js');
const statusPb = gen('status_pb.js');
const { Any } = require('google-protobuf/google/protobuf/any_pb.js');
const { Empty: GoogleEmpty } = require('google-protobuf/google/protobuf/empty_pb.js');

const { ReadReq, ReadResp, AppendResp, BatchAppendResp } = streamsPb;

export const SERVER_VERSION = '24.10.0-double';
/** The server's default search window for filtered reads and subscriptions ("count" window). */
export const DEFAULT_SEARCH_WINDOW = 32;
/** The server's default MaxAppendSize (bytes, counted as Event.SizeOnDisk: data + metadata + twice the type, summed over the append). */
export const DEFAULT_MAX_APPEND_SIZE = 1_048_576;

export type DoubleOptions = {
  host?: string;
  port?: number;
  /** Write a `$statsCollected` system event after every N client appends (0: never). Default 5. */
  systemEventEvery?: number;
  log?: EsdbLog;
  /** The server's MaxAppendSize: a larger append is refused with MaximumAppendSizeExceeded, nothing written. Default 1 048 576, as the server. */
  maxAppendSize?: number;
  /** The clock deadlines are judged by (ms since the epoch). Default Date.now. */
  now?: () => number;
};

/** Event.SizeOnDisk of the server: what an event counts against MaxAppendSize (the type in .NET characters, UTF-16 units). */
const sizeOnDisk = (p: Proposed) => p.data.length + p.customMetadata.length + 2 * p.type.length;

type LiveSub = { call: grpc.ServerWritableStream<any, any>; wake: () => void; sent: number; dropAfter?: number };

export class EsdbDouble {
  readonly log: EsdbLog;
  private readonly subs = new Set<LiveSub>();
  private readonly server = new grpc.Server();
  private appends = 0;
  /** Fault injection: drop each new subscription after it has sent this many events (once per subscription). */
  dropSubscriptionsAfter: number | undefined;
  /** Fault injection: runs before an append is decided, so a test can write a competing event first. */
  beforeAppend: ((stream: string) => void | Promise<void>) | undefined;
  /**
   * Fault injection: the next N appends (either call) are judged after their
   * deadline, as when they reach the server late: refused with the server's
   * deadline answer, nothing written.
   */
  expireDeadlines = 0;
  /**
   * Fault injection: the next N batch appends are written, then answered with
   * the server's Timeout status (its answer to a commit that timed out), so the
   * client sees DeadlineExceeded for an append that stands.
   */
  timeoutAfterWrite = 0;
  readonly maxAppendSize: number;
  private readonly now: () => number;
  /** Counts of the calls served, by kind. */
  readonly calls = { read: 0, subscribe: 0, append: 0, batchAppend: 0, features: 0, appended: 0, wrongExpectedVersion: 0, maxAppendSizeExceeded: 0, deadlineExceeded: 0 };
  private constructor(
    readonly host: string,
    public port: number,
    private readonly opts: DoubleOptions,
    log: EsdbLog,
  ) {
    this.log = log;
    this.maxAppendSize = opts.maxAppendSize ?? DEFAULT_MAX_APPEND_SIZE;
    this.now = opts.now ?? Date.now;
    this.log.onAppend = () => {
      for (const s of this.subs) s.wake();
    };
  }

  static async start(opts: DoubleOptions = {}): Promise<EsdbDouble> {
    const log = opts.log ?? new EsdbLog();
    const d = new EsdbDouble(opts.host ?? '127.0.0.1', opts.port ?? 0, opts, log);
    await d.listen();
    return d;
  }

  get url(): string {
    return `esdb://${this.host}:${this.port}?tls=false`;
  }

  private async listen(): Promise<void> {
    this.server.addService(streamsGrpc.StreamsService, {
      read: (call: grpc.ServerWritableStream<any, any>) => this.read(call),
      append: (call: grpc.ServerReadableStream<any, any>, cb: grpc.sendUnaryData<any>) => this.append(call, cb),
      batchAppend: (call: grpc.ServerDuplexStream<any, any>) => this.batchAppend(call),
      delete: (_c: unknown, cb: grpc.sendUnaryData<any>) => cb({ code: grpc.status.UNIMPLEMENTED, details: 'delete is not implemented by the double' }),
      tombstone: (_c: unknown, cb: grpc.sendUnaryData<any>) => cb({ code: grpc.status.UNIMPLEMENTED, details: 'tombstone is not implemented by the double' }),
    });
    this.server.addService(featuresGrpc.ServerFeaturesService, {
      getSupportedMethods: (_call: unknown, cb: grpc.sendUnaryData<any>) => {
        this.calls.features++;
        const res = new featuresPb.SupportedMethods();
        res.setEventStoreServerVersion(SERVER_VERSION);
        for (const name of ['read', 'append', 'batchappend']) {
          const m = new featuresPb.SupportedMethod();
          m.setServiceName('event_store.client.streams.streams');
          m.setMethodName(name);
          if (name === 'read') m.setFeaturesList(['position', 'events']);
          res.addMethods(m);
        }
        cb(null, res);
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(`${this.host}:${this.port}`, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
    );
  }

  /** Ends every open subscription with UNAVAILABLE, as a server losing the connection would. Returns how many. */
  dropSubscriptions(): number {
    const n = this.subs.size;
    for (const s of [...this.subs]) this.fail(s, 'subscription dropped by the double');
    return n;
  }

  get openSubscriptions(): number {
    return this.subs.size;
  }

  private fail(s: LiveSub, details: string) {
    this.subs.delete(s);
    s.wake();
    s.call.emit('error', { code: grpc.status.UNAVAILABLE, details });
  }

  async stop(): Promise<void> {
    for (const s of [...this.subs]) this.fail(s, 'server stopping');
    // Open append streams (the client keeps one batch-append call per channel)
    // would hold a graceful shutdown forever: cut them, as a stopping server does.
    this.server.forceShutdown();
  }

  // -------------------------------------------------------------------------
  // Wire <-> log

  private toReadEvent(r: LogRecord): any {
    const rec = new ReadResp.ReadEvent.RecordedEvent();
    const id = new sharedPb.UUID();
    id.setString(r.id);
    rec.setId(id);
    const sid = new sharedPb.StreamIdentifier();
    sid.setStreamName(Buffer.from(r.stream, 'utf8'));
    rec.setStreamIdentifier(sid);
    rec.setStreamRevision(r.revision.toString());
    rec.setPreparePosition(r.prepare.toString());
    rec.setCommitPosition(r.commit.toString());
    const md = rec.getMetadataMap();
    md.set('type', r.type);
    md.set('content-type', r.contentType);
    md.set('created', r.createdTicks.toString());
    rec.setCustomMetadata(r.customMetadata);
    rec.setData(r.data);
    const ev = new ReadResp.ReadEvent();
    ev.setEvent(rec);
    ev.setCommitPosition(r.commit.toString());
    const resp = new ReadResp();
    resp.setEvent(ev);
    return resp;
  }

  private matcher(options: any): Matcher {
    if (!options.hasFilter()) return () => true;
    const f = options.getFilter();
    const expr = f.hasStreamIdentifier() ? f.getStreamIdentifier() : f.getEventType();
    const field = f.hasStreamIdentifier() ? 'stream' : 'type';
    const prefixes: string[] = expr.getPrefixList();
    const regex: string = expr.getRegex();
    if (prefixes.length > 0) return (r) => prefixes.some((p) => r[field].startsWith(p));
    const re = new RegExp(regex);
    return (r) => re.test(r[field]);
  }

  private read(call: grpc.ServerWritableStream<any, any>): void {
    const options = call.request.getOptions();
    const backwards = options.getReadDirection() === ReadReq.Options.ReadDirection.BACKWARDS;
    if (options.hasStream()) {
      this.calls.read++;
      const so = options.getStream();
      const stream = Buffer.from(so.getStreamIdentifier().getStreamName_asU8()).toString('utf8');
      if (options.hasSubscription()) {
        call.emit('error', { code: grpc.status.UNIMPLEMENTED, details: 'stream subscriptions are not implemented by the double' });
        return;
      }
      const events = this.log.stream(stream);
      if (!events) {
        const resp = new ReadResp();
        const nf = new ReadResp.StreamNotFound();
        nf.setStreamIdentifier(so.getStreamIdentifier());
        resp.setStreamNotFound(nf);
        call.write(resp);
        call.end();
        return;
      }
      const count = BigInt(options.getCount());
      let from: bigint = so.hasRevision() ? BigInt(so.getRevision()) : so.hasEnd() ? BigInt(events.length - 1) : 0n;
      if (backwards && so.hasStart()) from = 0n;
      const out: LogRecord[] = [];
      if (backwards) {
        for (let i = Math.min(Number(from), events.length - 1); i >= 0 && BigInt(out.length) < count; i--) out.push(events[i]!);
      } else {
        for (let i = Number(from); i < events.length && BigInt(out.length) < count; i++) out.push(events[i]!);
      }
      void this.writeAll(call, out);
      return;
    }
    const all = options.getAll();
    const match = this.matcher(options);
    if (options.hasSubscription()) {
      this.calls.subscribe++;
      void this.subscribe(call, options, match);
      return;
    }
    this.calls.read++;
    const count = BigInt(options.getCount());
    let out: LogRecord[];
    if (backwards) {
      const before = all.hasPosition() ? BigInt(all.getPosition().getCommitPosition()) : all.hasStart() ? 0n : undefined;
      out = this.log.readAllBackwards(before, count, match);
    } else {
      const from = all.hasPosition() ? BigInt(all.getPosition().getCommitPosition()) : all.hasEnd() ? undefined : 0n;
      out = from === undefined ? [] : this.log.readAllForwards(from, count, match);
    }
    void this.writeAll(call, out);
  }

  private async writeAll(call: grpc.ServerWritableStream<any, any>, out: LogRecord[]): Promise<void> {
    for (const r of out) {
      if (call.cancelled) return;
      if (!call.write(this.toReadEvent(r))) await new Promise((res) => call.once('drain', res));
    }
    call.end();
  }

  private async subscribe(call: grpc.ServerWritableStream<any, any>, options: any, match: Matcher): Promise<void> {
    const all = options.getAll();
    const f = options.hasFilter() ? options.getFilter() : undefined;
    // Checkpoints: every window x multiplier events searched (the client's own
    // test: 384 events, interval 2, window 32 -> 6 or 7 checkpoints).
    const window = f ? (f.hasMax() ? f.getMax() : DEFAULT_SEARCH_WINDOW) : 0;
    const checkpointEvery = f ? window * Math.max(1, f.getCheckpointintervalmultiplier()) : 0;
    // Subscriptions from a position are exclusive; from END they see only new events.
    let cursor = all.hasPosition() ? this.log.indexAfter(BigInt(all.getPosition().getCommitPosition())) : all.hasEnd() ? this.log.length : 0;
    const sub: LiveSub = { call, wake: () => {}, sent: 0 };
    if (this.dropSubscriptionsAfter !== undefined) sub.dropAfter = this.dropSubscriptionsAfter;
    this.subs.add(sub);
    call.on('cancelled', () => {
      this.subs.delete(sub);
      sub.wake();
    });
    const confirmation = new ReadResp();
    const conf = new ReadResp.SubscriptionConfirmation();
    conf.setSubscriptionId(`sub-${Math.random().toString(36).slice(2)}`);
    confirmation.setConfirmation(conf);
    call.write(confirmation);
    let caughtUp = false;
    let searched = 0;
    const send = async (resp: any) => {
      if (!call.write(resp)) await new Promise((res) => call.once('drain', res));
    };
    while (this.subs.has(sub) && !call.cancelled) {
      if (cursor < this.log.length) {
        const r = this.log.at(cursor++)!;
        searched++;
        if (match(r)) {
          await send(this.toReadEvent(r));
          sub.sent++;
          if (sub.dropAfter !== undefined && sub.sent >= sub.dropAfter) {
            this.fail(sub, 'subscription dropped by the double (fault injection)');
            return;
          }
        }
        if (checkpointEvery > 0 && searched % checkpointEvery === 0) {
          const resp = new ReadResp();
          const cp = new ReadResp.Checkpoint();
          cp.setCommitPosition(r.commit.toString());
          cp.setPreparePosition(r.prepare.toString());
          resp.setCheckpoint(cp);
          await send(resp);
        }
        continue;
      }
      if (!caughtUp) {
        caughtUp = true;
        const resp = new ReadResp();
        resp.setCaughtUp(new ReadResp.CaughtUp());
        await send(resp);
      }
      await new Promise<void>((resolve) => (sub.wake = resolve));
      sub.wake = () => {};
    }
  }

  /**
   * Whether an append arrives after its deadline (the client's per-call
   * deadline: the batch's `deadline` option, the Append call's own gRPC
   * deadline). The server answers such an append with its deadline answer and
   * writes nothing.
   */
  private pastDeadline(deadline: Date | number | undefined): boolean {
    if (this.expireDeadlines > 0) {
      this.expireDeadlines--;
      return true;
    }
    if (deadline === undefined) return false;
    const at = deadline instanceof Date ? deadline.getTime() : deadline;
    return Number.isFinite(at) && at - this.now() <= 0;
  }

  /** The server's google.rpc.Status answers of a batch append (Status.Timeout, Status.MaximumAppendSizeExceeded). */
  private static status(kind: 'timeout' | 'max_append_size', maxAppendSize = 0): any {
    const st = new statusPb.Status();
    const any = new Any();
    if (kind === 'timeout') {
      any.pack(new sharedPb.Timeout().serializeBinary(), 'event_store.client.Timeout');
      st.setCode(grpc.status.DEADLINE_EXCEEDED);
      st.setMessage('Timeout');
    } else {
      const m = new sharedPb.MaximumAppendSizeExceeded();
      m.setMaxappendsize(maxAppendSize);
      any.pack(m.serializeBinary(), 'event_store.client.MaximumAppendSizeExceeded');
      st.setCode(grpc.status.INVALID_ARGUMENT);
      st.setMessage('MaximumAppendSizeExceeded');
    }
    st.setDetails(any);
    return st;
  }

  private appended() {
    this.appends++;
    this.calls.appended++;
    const every = this.opts.systemEventEvery ?? 5;
    if (every > 0 && this.appends % every === 0) this.log.appendSystem('$stats-127.0.0.1:2113', '$statsCollected', { appends: this.appends });
  }

  private static expected(o: any, kind: 'append' | 'batch'): Expected {
    if (kind === 'append' ? o.hasRevision() : o.hasStreamPosition()) return BigInt(kind === 'append' ? o.getRevision() : o.getStreamPosition());
    if (o.hasNoStream()) return 'no_stream';
    if (o.hasStreamExists()) return 'stream_exists';
    return 'any';
  }

  private static proposed(m: any): Proposed {
    const md = m.getMetadataMap();
    return {
      id: m.getId().getString(),
      type: md.get('type') as string,
      contentType: (md.get('content-type') as string) ?? 'application/octet-stream',
      data: Buffer.from(m.getData_asU8()),
      customMetadata: Buffer.from(m.getCustomMetadata_asU8()),
    };
  }

  private append(call: grpc.ServerReadableStream<any, any>, cb: grpc.sendUnaryData<any>): void {
    this.calls.append++;
    let stream = '';
    let expected: Expected = 'any';
    const proposed: Proposed[] = [];
    let size = 0;
    let refused = false;
    call.on('data', (req: any) => {
      if (refused) return;
      if (req.hasOptions()) {
        const o = req.getOptions();
        stream = Buffer.from(o.getStreamIdentifier().getStreamName_asU8()).toString('utf8');
        expected = EsdbDouble.expected(o, 'append');
        return;
      }
      const p = EsdbDouble.proposed(req.getProposedMessage());
      proposed.push(p);
      size += sizeOnDisk(p);
      if (size > this.maxAppendSize) {
        // The server stops reading and fails the call: InvalidArgument with the
        // exception named in the trailers (RpcExceptions.MaxAppendSizeExceeded).
        refused = true;
        this.calls.maxAppendSizeExceeded++;
        const md = new grpc.Metadata();
        md.set('exception', 'maximum-append-size-exceeded');
        md.set('maximum-append-size', String(this.maxAppendSize));
        cb({ code: grpc.status.INVALID_ARGUMENT, details: `Maximum Append Size of ${this.maxAppendSize} Exceeded.`, metadata: md });
      }
    });
    call.on('end', async () => {
      if (refused) return;
      if (this.pastDeadline(call.getDeadline())) {
        this.calls.deadlineExceeded++;
        return cb({ code: grpc.status.DEADLINE_EXCEEDED, details: 'Deadline Exceeded' });
      }
      await this.beforeAppend?.(stream);
      const res = new AppendResp();
      try {
        const r = this.log.append(stream, expected, proposed);
        this.appended();
        if (this.timeoutAfterWrite > 0) {
          // Written, but answered as the server answers a commit that timed out (RpcExceptions.Timeout).
          this.timeoutAfterWrite--;
          this.calls.deadlineExceeded++;
          return cb({ code: grpc.status.DEADLINE_EXCEEDED, details: 'Deadline Exceeded' });
        }
        const s = new AppendResp.Success();
        s.setCurrentRevision(r.revision.toString());
        const p = new AppendResp.Position();
        p.setCommitPosition(r.commit.toString());
        p.setPreparePosition(r.prepare.toString());
        s.setPosition(p);
        res.setSuccess(s);
      } catch (err) {
        if (!(err instanceof AppendRefused)) return cb({ code: grpc.status.INTERNAL, details: String(err) });
        this.calls.wrongExpectedVersion++;
        const w = new AppendResp.WrongExpectedVersion();
        if (err.current === 'no_stream') w.setCurrentNoStream(new sharedPb.Empty());
        else w.setCurrentRevision(err.current.toString());
        if (typeof expected === 'bigint') w.setExpectedRevision(expected.toString());
        else if (expected === 'no_stream') w.setExpectedNoStream(new sharedPb.Empty());
        else if (expected === 'stream_exists') w.setExpectedStreamExists(new sharedPb.Empty());
        else w.setExpectedAny(new sharedPb.Empty());
        res.setWrongExpectedVersion(w);
      }
      cb(null, res);
    });
  }

  private batchAppend(call: grpc.ServerDuplexStream<any, any>): void {
    this.calls.batchAppend++;
    const pending = new Map<string, { stream: string; sid: any; expected: Expected; options: any; proposed: Proposed[]; size: number }>();
    const refuse = (req: any, sid: any, error: any) => {
      const res = new BatchAppendResp();
      res.setCorrelationId(req.getCorrelationId());
      res.setStreamIdentifier(sid);
      res.setError(error);
      call.write(res);
    };
    call.on('data', async (req: any) => {
      const cid = req.getCorrelationId().getString();
      // As the server: a request opens with its options; later chunks of one
      // already answered (refused) find no pending write and are dropped.
      if (req.hasOptions()) {
        const o = req.getOptions();
        if (this.pastDeadline(o.hasDeadline() ? o.getDeadline().toDate() : undefined)) {
          this.calls.deadlineExceeded++;
          return refuse(req, o.getStreamIdentifier(), EsdbDouble.status('timeout'));
        }
        if (!pending.has(cid)) {
          pending.set(cid, { stream: Buffer.from(o.getStreamIdentifier().getStreamName_asU8()).toString('utf8'), sid: o.getStreamIdentifier(), expected: EsdbDouble.expected(o, 'batch'), options: o, proposed: [], size: 0 });
        }
      }
      const p = pending.get(cid);
      if (!p) return;
      for (const m of req.getProposedMessagesList()) {
        const e = EsdbDouble.proposed(m);
        p.proposed.push(e);
        p.size += sizeOnDisk(e);
      }
      if (p.size > this.maxAppendSize) {
        pending.delete(cid);
        this.calls.maxAppendSizeExceeded++;
        return refuse(req, p.sid, EsdbDouble.status('max_append_size', this.maxAppendSize));
      }
      if (!req.getIsFinal()) return;
      pending.delete(cid);
      await this.beforeAppend?.(p.stream);
      const res = new BatchAppendResp();
      res.setCorrelationId(req.getCorrelationId());
      res.setStreamIdentifier(p.sid);
      try {
        const r = this.log.append(p.stream, p.expected, p.proposed);
        this.appended();
        if (this.timeoutAfterWrite > 0) {
          // Written, but answered as the server answers a commit that timed out.
          this.timeoutAfterWrite--;
          this.calls.deadlineExceeded++;
          res.setError(EsdbDouble.status('timeout'));
          call.write(res);
          return;
        }
        const s = new BatchAppendResp.Success();
        s.setCurrentRevision(r.revision.toString());
        const pos = new sharedPb.AllStreamPosition();
        pos.setCommitPosition(r.commit.toString());
        pos.setPreparePosition(r.prepare.toString());
        s.setPosition(pos);
        res.setSuccess(s);
      } catch (err) {
        const st = new statusPb.Status();
        if (err instanceof AppendRefused) {
          this.calls.wrongExpectedVersion++;
          const w = new sharedPb.WrongExpectedVersion();
          if (err.current === 'no_stream') w.setCurrentNoStream(new GoogleEmpty());
          else w.setCurrentStreamRevision(err.current.toString());
          if (typeof p.expected === 'bigint') w.setExpectedStreamPosition(p.expected.toString());
          else if (p.expected === 'no_stream') w.setExpectedNoStream(new GoogleEmpty());
          else if (p.expected === 'stream_exists') w.setExpectedStreamExists(new GoogleEmpty());
          else w.setExpectedAny(new GoogleEmpty());
          const any = new Any();
          any.pack(w.serializeBinary(), 'event_store.client.WrongExpectedVersion');
          st.setCode(grpc.status.ALREADY_EXISTS); // as the server's Status.WrongExpectedVersion
          st.setMessage('WrongExpectedVersion');
          st.setDetails(any);
        } else {
          const any = new Any();
          any.pack(new sharedPb.Unknown().serializeBinary(), 'event_store.client.Unknown');
          st.setCode(2);
          st.setMessage(String(err));
          st.setDetails(any);
        }
        res.setError(st);
      }
      call.write(res);
    });
    call.on('end', () => call.end());
  }
}
