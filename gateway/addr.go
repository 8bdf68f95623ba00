package gateway

import (
	"net"
	"strings"
)

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
