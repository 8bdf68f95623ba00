package gateway

import (
	"fmt"
	"net"
	"strings"
)

// CheckAddr rejects a --http value that names no address to listen on,
// saying what one looks like; "" (no --http) passes.
func CheckAddr(addr string) error {
	if addr == "" {
		return nil
	}
	const want = "use HOST:PORT, :PORT or PORT, such as 127.0.0.1:8080"
	_, port, err := net.SplitHostPort(ListenAddr(addr))
	if err != nil {
		return fmt.Errorf("--http %q is not an address to listen on; %s", addr, want)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("--http %q: %q is not a port; %s", addr, port, want)
	}
	return nil
}

// ListenAddr is the address to listen on for a --http value: loopback
// unless the value names a host (a bare port such as "8080" binds
// 127.0.0.1:8080).
func ListenAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		// A bare port such as "8080".
		return net.JoinHostPort("127.0.0.1", strings.TrimPrefix(addr, ":"))
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// LoopbackBind reports whether the --http address listens on loopback
// only (a bare port does; see ListenAddr).
func LoopbackBind(addr string) bool {
	host, _, err := net.SplitHostPort(ListenAddr(addr))
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReplicaLabel names this replica in the sealed session ids it issues: its
// --session-id-prefix without the separator it ends with, else hostname.
func ReplicaLabel(prefix, hostname string) string {
	if l := strings.TrimRight(prefix, "-._"); l != "" {
		return l
	}
	return hostname
}
