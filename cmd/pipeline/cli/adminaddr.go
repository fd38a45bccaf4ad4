package cli

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/eoflow/pipeline/config"
)

// listenOrigin is where a job's admin.listen came from, for messages that
// say how to change it: the variable the file reads it from
// (${ADMIN_LISTEN:-...} in the example files), else the line that sets
// it, else nowhere (the default).
type listenOrigin struct {
	file     string
	variable string // e.g. ADMIN_LISTEN; "" when the value is written out
	line     int    // where admin.listen is set; 0 when it is not
}

// variableRef is a ${NAME} or ${NAME:-default} reference (config's
// interpolation syntax).
var variableRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

func adminListenOrigin(cfg *config.Config) listenOrigin {
	o := listenOrigin{file: cfg.File()}
	line, col, ok := cfg.Position("admin.listen")
	if !ok {
		return o
	}
	o.line = line
	data, err := os.ReadFile(cfg.File())
	if err != nil {
		return o
	}
	lines := strings.Split(string(data), "\n")
	if line > len(lines) {
		return o
	}
	text := lines[line-1]
	if col >= 1 && col <= len(text) {
		text = text[col-1:] // the value: a substitution's position is its ${
	}
	if m := variableRef.FindStringSubmatch(text); m != nil {
		o.variable = m[1]
	}
	return o
}

// String names the origin: "admin.listen of config.yaml, from $ADMIN_LISTEN".
func (o listenOrigin) String() string {
	switch {
	case o.variable != "":
		return fmt.Sprintf("admin.listen of %s, from $%s", o.file, o.variable)
	case o.line > 0:
		return fmt.Sprintf("admin.listen of %s, line %d", o.file, o.line)
	}
	return fmt.Sprintf("admin.listen's default; %s sets none", o.file)
}

// change says how to give the job another admin address than listen.
func (o listenOrigin) change(listen string) string {
	next := nextPort(listen)
	switch {
	case o.variable != "":
		return fmt.Sprintf("start it with another address in $%s (%s reads admin.listen from it), e.g. %s=%s, or %s=off to run without the admin API",
			o.variable, o.file, o.variable, next, o.variable)
	case o.line > 0:
		return fmt.Sprintf("set admin.listen in %s (line %d) to another address, e.g. %s, or to off to run without the admin API", o.file, o.line, next)
	}
	return fmt.Sprintf("add admin.listen to %s with another address (admin: {listen: %s}), or off to run without the admin API", o.file, next)
}

// nextPort is listen with the port after its own, as an example of
// another address.
func nextPort(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "127.0.0.1:8081"
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p >= 65535 {
		return net.JoinHostPort(host, "8081")
	}
	return net.JoinHostPort(host, strconv.Itoa(p+1))
}
