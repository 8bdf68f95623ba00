package protocol

import "testing"

func TestModern(t *testing.T) {
	for _, tt := range []struct {
		version string
		modern  bool
	}{
		{"2024-11-05", false},
		{"2025-03-26", false},
		{"2025-11-25", false},
		{"2026-07-28", true},
		{"2027-01-01", true},
		{"", false},
	} {
		if got := Modern(tt.version); got != tt.modern {
			t.Errorf("Modern(%q) = %v, want %v", tt.version, got, tt.modern)
		}
	}
}

func TestVersionsNewestFirst(t *testing.T) {
	for i := 1; i < len(Versions); i++ {
		if Versions[i-1] <= Versions[i] {
			t.Fatalf("Versions are not newest first: %q before %q", Versions[i-1], Versions[i])
		}
	}
	if !Modern(Versions[0]) || Modern(LatestSession) || !Supported(LatestSession) {
		t.Fatalf("Versions[0] = %q, LatestSession = %q: the newest must be sessionless, LatestSession session-based and served", Versions[0], LatestSession)
	}
}
