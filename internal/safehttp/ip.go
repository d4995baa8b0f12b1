package safehttp

import "net/netip"

// The range tables are built by functions rather than held in package
// variables (no globals); a check parses a few dozen short strings, which is
// noise next to the dial it guards.

// blockedV4 lists IPv4 ranges no user-supplied URL may reach.
func blockedV4() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),       // "this network", includes 0.0.0.0 (unspecified)
		netip.MustParsePrefix("10.0.0.0/8"),      // private
		netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (RFC 6598)
		netip.MustParsePrefix("127.0.0.0/8"),     // loopback
		netip.MustParsePrefix("169.254.0.0/16"),  // link-local, includes cloud metadata 169.254.169.254
		netip.MustParsePrefix("172.16.0.0/12"),   // private
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
		netip.MustParsePrefix("192.168.0.0/16"),  // private
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
		netip.MustParsePrefix("224.0.0.0/4"),     // multicast
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved, includes broadcast 255.255.255.255
	}
}

// blockedV6 lists IPv6 ranges no user-supplied URL may reach. IPv6 forms that
// embed an IPv4 address are handled separately in IsBlockedIP.
func blockedV6() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("::/96"),          // IPv4-compatible (deprecated), includes :: and ::1
		netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215)
		netip.MustParsePrefix("100::/64"),       // discard-only
		netip.MustParsePrefix("2001:db8::/32"),  // documentation
		netip.MustParsePrefix("fc00::/7"),       // unique local (ULA)
		netip.MustParsePrefix("fe80::/10"),      // link-local
		netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
		netip.MustParsePrefix("ff00::/8"),       // multicast
	}
}

// alwaysBlocked ranges stay blocked even with Options.AllowPrivate: link-local
// is where cloud metadata servers live (169.254.169.254 on GCP, AWS, Azure),
// and fd00:ec2::254 is the AWS IPv6 metadata endpoint.
func alwaysBlocked() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("fe80::/10"),
		netip.MustParsePrefix("fd00:ec2::254/128"),
	}
}

// IsBlockedIP reports whether ip is an address that outbound requests for
// user-supplied URLs must not reach: loopback, private, link-local (including
// cloud metadata), unspecified, multicast, broadcast, CGNAT, "this network",
// benchmarking, documentation, IETF-assigned and reserved ranges, IPv6 ULA,
// site-local and discard ranges, and the IPv4-mapped, IPv4-compatible, NAT64
// (64:ff9b::/96) and 6to4 (2002::/16) forms embedding a blocked IPv4 address.
// The invalid zero Addr is blocked. Zones are ignored.
func IsBlockedIP(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.WithZone("") // Prefix.Contains never matches a zoned address
	if v4, ok := embeddedV4(ip); ok && inAny(v4, blockedV4()) {
		return true
	}
	if ip.Is4() || ip.Is4In6() {
		return false
	}
	if inAny(ip, blockedV6()) {
		return true
	}
	// Belt and braces for anything the tables above might miss.
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsMulticast() || ip.IsUnspecified() || ip.IsInterfaceLocalMulticast()
}

// isAlwaysBlocked reports whether ip, or the IPv4 address it embeds, is in a
// range that AllowPrivate does not open (cloud metadata).
func isAlwaysBlocked(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.WithZone("")
	if v4, ok := embeddedV4(ip); ok && inAny(v4, alwaysBlocked()) {
		return true
	}
	return inAny(ip, alwaysBlocked())
}

// embeddedV4 returns the IPv4 address ip is or carries: itself, the
// IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64
// (64:ff9b::a.b.c.d) or 6to4 (2002:AABB:CCDD::) form.
func embeddedV4(ip netip.Addr) (netip.Addr, bool) {
	switch {
	case ip.Is4():
		return ip, true
	case ip.Is4In6():
		return ip.Unmap(), true
	}
	b := ip.As16()
	switch {
	case netip.MustParsePrefix("::/96").Contains(ip), // IPv4-compatible
		netip.MustParsePrefix("64:ff9b::/96").Contains(ip): // NAT64
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case netip.MustParsePrefix("2002::/16").Contains(ip): // 6to4
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

func inAny(ip netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
