package engine

import "testing"

// A process's admin address goes into its member's client id and comes
// back out of the group's description; a host left empty is the one the
// broker saw.
func TestAdvertisedAdmin(t *testing.T) {
	for _, c := range []struct {
		advertise, listen, clientID, clientHost, want string
	}{
		{listen: "127.0.0.1:8081", clientID: "pipeline-j", clientHost: "/10.0.0.5", want: "127.0.0.1:8081"},
		{listen: "0.0.0.0:8080", clientID: "pipeline-j", clientHost: "/10.0.0.5", want: "10.0.0.5:8080"},
		{listen: "[::]:8080", clientID: "pipeline-j", clientHost: "/fd00::7", want: "[fd00::7]:8080"},
		{listen: ":8080", clientID: "c;x", clientHost: "/10.0.0.5", want: "10.0.0.5:8080"},
		{advertise: "job-a.internal:9000", listen: "0.0.0.0:8080", clientID: "pipeline-j", clientHost: "/10.0.0.5", want: "job-a.internal:9000"},
		{listen: "0.0.0.0:8080", clientID: "pipeline-j", clientHost: "", want: ""}, // no host known
	} {
		id := memberClientID(c.clientID, AdvertisedAdmin(c.advertise, c.listen))
		if got := advertisedAdmin(id, c.clientHost); got != c.want {
			t.Errorf("listen %q advertise %q: client id %q, host %q: admin %q, want %q", c.listen, c.advertise, id, c.clientHost, got, c.want)
		}
	}
	// A member that advertised nothing, or garbage.
	for _, id := range []string{"pipeline-j", "kgo", "x;admin=", "x;admin=nohostport"} {
		if got := advertisedAdmin(id, "/10.0.0.5"); got != "" {
			t.Errorf("client id %q: admin %q, want none", id, got)
		}
	}
	if got := memberClientID("pipeline-j", ""); got != "pipeline-j" {
		t.Errorf("no admin address: client id %q, want it unchanged", got)
	}
}
