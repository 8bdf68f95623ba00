package demo

import (
	"encoding/json"
	"fmt"
	"strings"
)

// configEnv are the variables the demo config sets for its tools server, in
// the order its --env names them; its env tool reports these and no other.
var configEnv = []struct{ name, value string }{
	{"DEMO_GREETING", "hello from the built-in demo config"},
}

// Config is the built-in demo config, which a command reads when it finds no
// config of the user's: two servers run by exe, the binary that serves these
// demo servers (through its demo-server subcommand): the stateless toolbox,
// shared by every session, and the stateful counter, leased per session.
func Config(exe string) []byte {
	// The path is a YAML string in which $ would start a variable.
	quoted, _ := json.Marshal(strings.ReplaceAll(exe, "$", "$$"))
	names := make([]string, 0, len(configEnv))
	env := make([]string, 0, len(configEnv))
	for _, v := range configEnv {
		q, _ := json.Marshal(v.value)
		names = append(names, v.name)
		env = append(env, v.name+": "+string(q))
	}
	return []byte(fmt.Sprintf(`version: 1
servers:
  demo:
    truely-stateless: true
    command: %[1]s
    args: [demo-server, tools, --env, %[2]s]
    env: {%[3]s}
    transform:
      - prefix: demo_
  counter:
    command: %[1]s
    args: [demo-server, counter]
    transform:
      - prefix: counter_
    lease:
      idle_ttl: 30m
      prewarm: 1
`, quoted, strings.Join(names, ","), strings.Join(env, ", ")))
}
