import net from 'node:net';

// A loopback proxy in front of the database loses one answer on demand: once
// armed, it closes both sides instead of forwarding the first server message
// that completes a command whose tag starts with the armed word. Blocked, it
// closes a connection instead of forwarding the client's next write that
// carries a given statement text (a lookup that then fails).

export class LossyProxy {
  private armed: string | undefined;
  private armedSentBy: string | undefined;
  /** Counts armings: a connection marked for one arming is not marked for the next. */
  private generation = 0;
  private blocked: string | undefined;
  lost = 0;
  refused = 0;
  private readonly server: net.Server;
  private constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => this.pipe(client));
  }

  static async start(target: { host: string; port: number }): Promise<LossyProxy> {
    const p = new LossyProxy(target);
    await new Promise<void>((r) => p.server.listen(0, '127.0.0.1', r));
    return p;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /**
   * Loses the next answer completing a command tagged `tag`; with `sentBy`,
   * only on a connection whose client sent `sentBy` (a statement's text or a
   * prepared statement's name) since arming, so other connections' commands
   * (the read side's own transactions, say) pass.
   */
  arm(tag: string, sentBy?: string): void {
    this.armed = tag;
    this.armedSentBy = sentBy;
    this.generation++;
  }

  /** The next client write containing `text` (a statement) closes its connection instead of reaching the server. */
  block(text: string): void {
    this.blocked = text;
  }

  private pipe(client: net.Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    let pending = Buffer.alloc(0);
    // The arming for which this connection's client sent `armedSentBy`.
    let sent = -1;
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (c: Buffer) => {
      if (this.blocked && c.includes(this.blocked)) {
        this.blocked = undefined;
        this.refused++;
        close();
        return;
      }
      if (this.armedSentBy && c.includes(this.armedSentBy)) sent = this.generation;
      upstream.write(c);
    });
    upstream.on('data', (chunk: Buffer) => {
      // Server messages: a type byte, a 4-byte length (itself included), the body.
      pending = Buffer.concat([pending, chunk]);
      let lose = false;
      while (pending.length >= 5) {
        const len = pending.readUInt32BE(1);
        if (pending.length < 1 + len) break;
        const here = this.armedSentBy === undefined || sent === this.generation;
        if (this.armed && here && pending[0] === 0x43 /* C: CommandComplete */ && pending.subarray(5, 1 + len).toString('utf8').startsWith(this.armed)) lose = true;
        pending = pending.subarray(1 + len);
      }
      if (lose) {
        this.armed = undefined;
        this.lost++;
        close();
        return;
      }
      client.write(chunk);
    });
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  }

  async stop(): Promise<void> {
    await new Promise((r) => this.server.close(r));
  }
}
