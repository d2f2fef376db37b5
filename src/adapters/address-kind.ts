import net from 'node:net';

// What kind of address an outbound request would reach, from the IANA IPv4 and
// IPv6 Special-Purpose Address Registries (RFC 6890 and successors), matched
// with Node's net.BlockList. An IPv6 address that carries an IPv4 one (mapped
// ::ffff:0:0/96, the deprecated compatible ::/96, NAT64 64:ff9b::/96, 6to4
// 2002::/16) is judged by the IPv4 address it reaches. An IPv6 address outside
// global unicast (2000::/3) is reserved: nothing else is routable on the Internet.

export type AddressKind = 'loopback' | 'private' | 'link_local' | 'reserved' | 'public';

type Ranges = Partial<Record<Exclude<AddressKind, 'public'>, [string, number][]>>;

const V4: Ranges = {
  loopback: [['127.0.0.0', 8]],
  private: [
    ['10.0.0.0', 8],
    ['172.16.0.0', 12],
    ['192.168.0.0', 16],
    ['100.64.0.0', 10], // shared address space (carrier-grade NAT), RFC 6598
  ],
  link_local: [['169.254.0.0', 16]], // includes the 169.254.169.254 metadata service
  reserved: [
    ['0.0.0.0', 8], // "this network"
    ['192.0.0.0', 24], // IETF protocol assignments
    ['192.0.2.0', 24], // TEST-NET-1
    ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
    ['198.18.0.0', 15], // benchmarking
    ['198.51.100.0', 24], // TEST-NET-2
    ['203.0.113.0', 24], // TEST-NET-3
    ['224.0.0.0', 4], // multicast
    ['240.0.0.0', 4], // reserved, and the limited broadcast 255.255.255.255
  ],
};

const V6: Ranges = {
  loopback: [['::1', 128]],
  private: [
    ['fc00::', 7], // unique local
    ['fec0::', 10], // site-local (deprecated)
    ['64:ff9b:1::', 48], // local-use NAT64, RFC 8215
  ],
  link_local: [['fe80::', 10]],
  reserved: [
    ['::', 128], // unspecified
    ['100::', 64], // discard-only
    ['2001::', 23], // IETF protocol assignments (Teredo 2001::/32 included)
    ['2001:db8::', 32], // documentation
    ['3fff::', 20], // documentation
    ['5f00::', 16], // segment routing SIDs
    ['ff00::', 8], // multicast
  ],
};

function lists(ranges: Ranges, family: 'ipv4' | 'ipv6'): [AddressKind, net.BlockList][] {
  return Object.entries(ranges).map(([kind, subnets]) => {
    const list = new net.BlockList();
    for (const [addr, prefix] of subnets) list.addSubnet(addr, prefix, family);
    return [kind as AddressKind, list];
  });
}
const V4_LISTS = lists(V4, 'ipv4');
const V6_LISTS = lists(V6, 'ipv6');
const GLOBAL_UNICAST = new net.BlockList();
GLOBAL_UNICAST.addSubnet('2000::', 3, 'ipv6');

/** The eight 16-bit groups of an IPv6 literal (any spelling the URL parser accepts). */
function groups(ip: string): number[] {
  const canonical = new URL(`http://[${ip}]/`).hostname.slice(1, -1); // lower-case hex, compressed
  const [head, tail] = canonical.includes('::') ? canonical.split('::') : [canonical, undefined];
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : Array<string>(8 - h.length - t.length).fill('0');
  return [...h, ...fill, ...t].map((g) => parseInt(g, 16));
}

const v4Of = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/** The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4), if any. */
function embeddedV4(ip: string): string | undefined {
  const g = groups(ip);
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return v4Of(g[6]!, g[7]!); // ::ffff:a.b.c.d
  if (zeros(0, 6) && (g[6] !== 0 || g[7]! > 1)) return v4Of(g[6]!, g[7]!); // ::a.b.c.d (not :: or ::1)
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return v4Of(g[6]!, g[7]!); // 64:ff9b::a.b.c.d
  if (g[0] === 0x2002) return v4Of(g[1]!, g[2]!); // 2002:AABB:CCDD::/48
  return undefined;
}

function v4Kind(ip: string): AddressKind {
  for (const [kind, list] of V4_LISTS) if (list.check(ip, 'ipv4')) return kind;
  return 'public';
}

function v6Kind(ip: string): AddressKind {
  const v4 = embeddedV4(ip);
  if (v4 !== undefined) return v4Kind(v4);
  for (const [kind, list] of V6_LISTS) if (list.check(ip, 'ipv6')) return kind;
  return GLOBAL_UNICAST.check(ip, 'ipv6') ? 'public' : 'reserved';
}

/** The kind of an IP literal (brackets allowed); anything that is not one is reserved. */
export function addressKind(ip: string): AddressKind {
  const bare = ip.replace(/^\[|\]$/g, '');
  if (net.isIPv4(bare)) return v4Kind(bare);
  if (net.isIPv6(bare)) return v6Kind(bare.replace(/%.*$/, ''));
  return 'reserved';
}
