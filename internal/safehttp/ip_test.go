package safehttp

import (
	"net/netip"
	"testing"
)

func TestIsBlockedIP(t *testing.T) {
	tests := []struct {
		name    string
		ip      string
		blocked bool
	}{
		// Public addresses stay reachable.
		{name: "google dns v4", ip: "8.8.8.8", blocked: false},
		{name: "cloudflare v4", ip: "1.1.1.1", blocked: false},
		{name: "public just below 10/8", ip: "9.255.255.255", blocked: false},
		{name: "public just above 10/8", ip: "11.0.0.0", blocked: false},
		{name: "public just outside 172.16/12", ip: "172.32.0.1", blocked: false},
		{name: "public just outside CGNAT", ip: "100.128.0.1", blocked: false},
		{name: "public just outside 198.18/15", ip: "198.20.0.1", blocked: false},
		{name: "public 223.255.255.255", ip: "223.255.255.255", blocked: false},
		{name: "google dns v6", ip: "2001:4860:4860::8888", blocked: false},
		{name: "cloudflare v6", ip: "2606:4700:4700::1111", blocked: false},
		{name: "v4-mapped public", ip: "::ffff:8.8.8.8", blocked: false},
		{name: "nat64 public", ip: "64:ff9b::808:808", blocked: false},
		{name: "6to4 public", ip: "2002:808:808::1", blocked: false},

		// Loopback.
		{name: "loopback", ip: "127.0.0.1", blocked: true},
		{name: "loopback range end", ip: "127.255.255.254", blocked: true},
		{name: "loopback v6", ip: "::1", blocked: true},
		// Private.
		{name: "private 10/8", ip: "10.0.0.1", blocked: true},
		{name: "private 10/8 end", ip: "10.255.255.255", blocked: true},
		{name: "private 172.16/12", ip: "172.16.0.1", blocked: true},
		{name: "private 172.16/12 end", ip: "172.31.255.255", blocked: true},
		{name: "private 192.168/16", ip: "192.168.1.1", blocked: true},
		// Link-local and metadata.
		{name: "link-local v4", ip: "169.254.1.1", blocked: true},
		{name: "cloud metadata", ip: "169.254.169.254", blocked: true},
		{name: "link-local v6", ip: "fe80::1", blocked: true},
		{name: "link-local v6 with zone", ip: "fe80::1%eth0", blocked: true},
		{name: "link-local v6 range end", ip: "febf:ffff::1", blocked: true},
		{name: "aws metadata v6", ip: "fd00:ec2::254", blocked: true},
		// Unspecified, multicast, broadcast.
		{name: "unspecified v4", ip: "0.0.0.0", blocked: true},
		{name: "unspecified v6", ip: "::", blocked: true},
		{name: "this network 0/8", ip: "0.1.2.3", blocked: true},
		{name: "multicast v4", ip: "224.0.0.1", blocked: true},
		{name: "multicast v4 end", ip: "239.255.255.255", blocked: true},
		{name: "multicast v6", ip: "ff02::1", blocked: true},
		{name: "multicast v6 global scope", ip: "ff0e::1", blocked: true},
		{name: "interface-local multicast v6", ip: "ff01::1", blocked: true},
		{name: "broadcast", ip: "255.255.255.255", blocked: true},
		// Special-purpose v4.
		{name: "cgnat", ip: "100.64.0.1", blocked: true},
		{name: "cgnat end", ip: "100.127.255.255", blocked: true},
		{name: "benchmarking", ip: "198.18.0.1", blocked: true},
		{name: "benchmarking end", ip: "198.19.255.255", blocked: true},
		{name: "ietf protocol assignments", ip: "192.0.0.170", blocked: true},
		{name: "reserved 240/4", ip: "240.0.0.1", blocked: true},
		{name: "reserved 240/4 high", ip: "250.1.2.3", blocked: true},
		{name: "documentation test-net-1", ip: "192.0.2.1", blocked: true},
		{name: "documentation test-net-2", ip: "198.51.100.1", blocked: true},
		{name: "documentation test-net-3", ip: "203.0.113.1", blocked: true},
		// Special-purpose v6.
		{name: "ula fc00", ip: "fc00::1", blocked: true},
		{name: "ula fd00", ip: "fd12:3456:789a::1", blocked: true},
		{name: "site-local v6", ip: "fec0::1", blocked: true},
		{name: "discard-only v6", ip: "100::1", blocked: true},
		{name: "documentation v6", ip: "2001:db8::1", blocked: true},
		{name: "local-use nat64", ip: "64:ff9b:1::808:808", blocked: true},
		// IPv4-mapped forms.
		{name: "mapped loopback", ip: "::ffff:127.0.0.1", blocked: true},
		{name: "mapped private 10/8", ip: "::ffff:10.0.0.1", blocked: true},
		{name: "mapped private 172.16/12", ip: "::ffff:172.16.0.1", blocked: true},
		{name: "mapped private 192.168/16", ip: "::ffff:192.168.0.1", blocked: true},
		{name: "mapped metadata", ip: "::ffff:169.254.169.254", blocked: true},
		{name: "mapped metadata hex", ip: "::ffff:a9fe:a9fe", blocked: true},
		{name: "mapped unspecified", ip: "::ffff:0.0.0.0", blocked: true},
		{name: "mapped multicast", ip: "::ffff:224.0.0.1", blocked: true},
		{name: "mapped broadcast", ip: "::ffff:255.255.255.255", blocked: true},
		{name: "mapped cgnat", ip: "::ffff:100.64.0.1", blocked: true},
		{name: "mapped benchmarking", ip: "::ffff:198.18.0.1", blocked: true},
		{name: "mapped ietf", ip: "::ffff:192.0.0.1", blocked: true},
		{name: "mapped reserved", ip: "::ffff:240.0.0.1", blocked: true},
		// IPv4-compatible forms (deprecated; the whole ::/96 is refused).
		{name: "compatible loopback", ip: "::127.0.0.1", blocked: true},
		{name: "compatible private", ip: "::10.0.0.1", blocked: true},
		{name: "compatible metadata", ip: "::169.254.169.254", blocked: true},
		{name: "compatible public", ip: "::8.8.8.8", blocked: true},
		// NAT64 embedding a blocked v4.
		{name: "nat64 loopback", ip: "64:ff9b::127.0.0.1", blocked: true},
		{name: "nat64 private", ip: "64:ff9b::10.0.0.1", blocked: true},
		{name: "nat64 metadata", ip: "64:ff9b::a9fe:a9fe", blocked: true},
		{name: "nat64 cgnat", ip: "64:ff9b::100.64.0.1", blocked: true},
		{name: "nat64 unspecified", ip: "64:ff9b::", blocked: true},
		// 6to4 embedding a blocked v4.
		{name: "6to4 loopback", ip: "2002:7f00:1::1", blocked: true},
		{name: "6to4 private", ip: "2002:c0a8:101::1", blocked: true},
		{name: "6to4 metadata", ip: "2002:a9fe:a9fe::", blocked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.ip)
			if got := IsBlockedIP(ip); got != tt.blocked {
				t.Fatalf("IsBlockedIP(%s) = %v, want %v", ip, got, tt.blocked)
			}
		})
	}
	t.Run("zero addr", func(t *testing.T) {
		if !IsBlockedIP(netip.Addr{}) {
			t.Fatal("zero Addr must be blocked")
		}
	})
}

func TestAllowPrivateStillBlocksMetadata(t *testing.T) {
	tests := []struct {
		name    string
		ip      string
		blocked bool
	}{
		{name: "loopback allowed", ip: "127.0.0.1", blocked: false},
		{name: "private allowed", ip: "10.1.2.3", blocked: false},
		{name: "ula allowed", ip: "fd12::1", blocked: false},
		{name: "public allowed", ip: "8.8.8.8", blocked: false},
		{name: "metadata blocked", ip: "169.254.169.254", blocked: true},
		{name: "mapped metadata blocked", ip: "::ffff:169.254.169.254", blocked: true},
		{name: "nat64 metadata blocked", ip: "64:ff9b::169.254.169.254", blocked: true},
		{name: "link-local v6 blocked", ip: "fe80::1%eth0", blocked: true},
		{name: "aws v6 metadata blocked", ip: "fd00:ec2::254", blocked: true},
	}
	g := &guard{allowPrivate: true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ap := netip.AddrPortFrom(netip.MustParseAddr(tt.ip), 80)
			if got := !g.allowed(ap); got != tt.blocked {
				t.Fatalf("blocked(%s) = %v, want %v", ap, got, tt.blocked)
			}
		})
	}
}

func BenchmarkIsBlockedIP(b *testing.B) {
	ips := []netip.Addr{
		netip.MustParseAddr("8.8.8.8"),
		netip.MustParseAddr("2001:4860:4860::8888"),
	}
	for b.Loop() {
		for _, ip := range ips {
			IsBlockedIP(ip)
		}
	}
}
