package cli

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// A taken admin port fails `run` at once with how to pick another: the
// variable the file reads admin.listen from (ADMIN_LISTEN in the example
// files), else the field of the file, else the field to add.
func TestRunOnATakenAdminPortSaysHowToChangeIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()

	t.Setenv("ADMIN_LISTEN", taken)
	code, _, errOut := runCLI("run", "-c", "../../../examples/parity-sum/config.yaml", "--progress=false")
	if code != 1 || !strings.Contains(errOut, "address already in use") ||
		!strings.Contains(errOut, "ADMIN_LISTEN=") || !strings.Contains(errOut, "admin.listen") {
		t.Fatalf("run on a taken port, admin.listen from $ADMIN_LISTEN: exit %d, stderr:\n%s", code, errOut)
	}

	written := writeFile(t, fmt.Sprintf("name: j\nkafka:\n  brokers: [127.0.0.1:9092]\nsources:\n  - topics: [in]\nsinks:\n  - topic: out\nadmin:\n  listen: %s\n", taken))
	code, _, errOut = runCLI("run", "-c", written, "--progress=false")
	if code != 1 || !strings.Contains(errOut, "set admin.listen in "+written+" (line 9)") || strings.Contains(errOut, "ADMIN_LISTEN") {
		t.Fatalf("run on a taken port, admin.listen written: exit %d, stderr:\n%s", code, errOut)
	}
}

// savepoint create that finds no job at the admin address says where the
// address came from, and how to give another.
func TestSavepointCreateWithNoJobThereSaysWhereTheAddressCameFrom(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	t.Setenv("ADMIN_LISTEN", closed)
	code, _, errOut := runCLI("savepoint", "create", "-c", "../../../examples/parity-sum/config.yaml", "-token", "t", "sp-1")
	if code != 1 || !strings.Contains(errOut, "admin.listen of ../../../examples/parity-sum/config.yaml, from $ADMIN_LISTEN") ||
		!strings.Contains(errOut, "-admin URL") {
		t.Fatalf("savepoint create with nothing at $ADMIN_LISTEN: exit %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runCLI("savepoint", "create", "-admin", "http://"+closed, "-token", "t", "sp-1")
	if code != 1 || !strings.Contains(errOut, "no job answers at http://"+closed+": ") || !strings.Contains(errOut, "it is -admin's") {
		t.Fatalf("savepoint create -admin with nothing there: exit %d, stderr:\n%s", code, errOut)
	}
}
