package naming

import "testing"

func TestAppURIRoundTrip(t *testing.T) {
	for _, tc := range []struct{ server, uri, exported string }{
		{"a", "ui://get-time/mcp-app.html", "ui://a/get-time/mcp-app.html"},
		{"b.2", "ui://main", "ui://b.2/main"},
		{"c", "UI://x/y?z=1", "ui://c/x/y?z=1"},
	} {
		got := AppURI(tc.server, tc.uri)
		if got != tc.exported {
			t.Errorf("AppURI(%q, %q) = %q, want %q", tc.server, tc.uri, got, tc.exported)
		}
		server, original, ok := AppOriginal(got)
		if !ok || server != tc.server || !IsAppURI(original) || original[len(AppScheme):] != tc.uri[len(AppScheme):] {
			t.Errorf("AppOriginal(%q) = %q, %q, %v; want %q and %q", got, server, original, ok, tc.server, tc.uri)
		}
	}
	if got := AppURI("a", "file:///x"); got != "file:///x" {
		t.Errorf("a file URI is renamed to %q", got)
	}
	for _, uri := range []string{"file:///x", "ui://", "ui:///x", "ui://main"} {
		if s, o, ok := AppOriginal(uri); ok {
			t.Errorf("AppOriginal(%q) = %q, %q, true; want not an exported app URI", uri, s, o)
		}
	}
}
