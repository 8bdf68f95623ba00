package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func hashOf(t *testing.T, text string, env map[string]string) string {
	t.Helper()
	ws, problems := LoadBytes("/cfg/mcp.yaml", []byte(text), envOf(env))
	require.NotNil(t, ws, render(problems))
	require.False(t, HasErrors(problems), render(problems))
	require.Len(t, ws.Servers, 1)
	return ws.Servers[0].Hash
}

const hashBase = `version: 1
servers:
  s:
    command: npx
    args: [a, b]
    env: {A: '1', B: {env: TOKEN}}
    tools:
      whitelist: ['x_*']
      config:
        t1: {timeout: 1s}
        t2: {max_instances: 2}
    transform:
      - prefix: p_
`

func TestHashStable(t *testing.T) {
	env := map[string]string{"TOKEN": "secret"}
	base := hashOf(t, hashBase, env)
	assert.Equal(t, base, hashOf(t, hashBase, env), "same input, same hash")

	reordered := `version: 1
# comments and blank lines move every line number

servers:
  s:
    transform:
      - prefix: p_
    tools:
      config:
        t2: {max_instances: 2}
        t1: {timeout: 1s}
      whitelist: ['x_*']
    env: {B: {env: TOKEN}, A: 1}
    args: [a, b]
    command: npx
    request_timeout: 60
    protocol: auto
`
	assert.Equal(t, base, hashOf(t, reordered, env), "key order, lines and spelled-out defaults do not count")

	ws, _ := LoadBytes("/cfg/other-name.yaml", []byte(hashBase), envOf(env))
	assert.Equal(t, base, ws.Servers[0].Hash, "the file name does not count")
}

func TestHashChanges(t *testing.T) {
	env := map[string]string{"TOKEN": "secret"}
	base := hashOf(t, hashBase, env)
	tests := []struct {
		name string
		text string
		env  map[string]string
	}{
		{"secret value", hashBase, map[string]string{"TOKEN": "rotated"}},
		{"arg order", strings.Replace(hashBase, "[a, b]", "[b, a]", 1), env},
		{"command", strings.Replace(hashBase, "command: npx", "command: uvx", 1), env},
		{"env literal", strings.Replace(hashBase, "A: '1'", "A: '2'", 1), env},
		{"filter", strings.Replace(hashBase, "x_*", "y_*", 1), env},
		{"tool config", strings.Replace(hashBase, "timeout: 1s", "timeout: 2s", 1), env},
		{"transform", strings.Replace(hashBase, "prefix: p_", "suffix: p_", 1), env},
		{"timeout", hashBase + "    request_timeout: 61s\n", env},
		{"lease reminder", hashBase + "    lease_reminder: false\n", env},
		{"stateless", hashBase + "    truely-stateless: true\n", env},
		{"cwd", hashBase + "    cwd: /\n", env},
		{"naming pattern", hashBase + "naming: {valid_pattern: '^[a-z_*]+$'}\n", env},
		{"admin default reaches the server", hashBase + "admin: {lease_reminder: false}\n", env},
		{"lease max_calls", hashBase + "    lease: {max_calls: 5}\n", env},
		{"lease max_age", hashBase + "    lease: {max_age: 1h}\n", env},
		{"lease queue_timeout", hashBase + "    lease: {queue_timeout: 5s}\n", env},
		{"lease cap lifted", hashBase + "    lease: {max_instances: 0}\n", env},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.NotEqual(t, base, hashOf(t, tt.text, tt.env))
		})
	}
}

// TestHashCoversEveryField changes each Server field in turn and expects a new hash, so a
// field added to Server cannot be forgotten in hashServer.
func TestHashCoversEveryField(t *testing.T) {
	// FromEnv and HostVars only record which parts of the hashed fields came from the
	// environment, and from where.
	notHashed := map[string]bool{"ID": true, "File": true, "Line": true, "Hash": true, "FromEnv": true, "HostVars": true}
	base := &Server{Transport: TransportStdio, Tools: Tools{Mode: ModeDynamic}}
	baseHash := hashServer(base, DefaultValidPattern)

	typ := reflect.TypeOf(*base)
	for i := range typ.NumField() {
		field := typ.Field(i)
		if notHashed[field.Name] {
			continue
		}
		for _, path := range leafPaths(field.Type, []int{i}) {
			s := *base
			setNonZero(t, reflect.ValueOf(&s).Elem().FieldByIndex(path))
			assert.NotEqual(t, baseHash, hashServer(&s, DefaultValidPattern), "field %s (%v) is not hashed", field.Name, path)
		}
	}
}

// leafPaths lists the index paths of every non-struct field under t.
func leafPaths(t reflect.Type, prefix []int) [][]int {
	if t.Kind() != reflect.Struct || t == reflect.TypeOf(time.Duration(0)) {
		return [][]int{prefix}
	}
	var out [][]int
	for i := range t.NumField() {
		out = append(out, leafPaths(t.Field(i).Type, append(append([]int{}, prefix...), i))...)
	}
	return out
}

func setNonZero(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Slice:
		elem := reflect.New(v.Type().Elem()).Elem()
		if elem.Kind() == reflect.Struct {
			elem.Field(0).SetString("k")
		}
		v.Set(reflect.Append(v, elem))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf("k"), reflect.New(v.Type().Elem()).Elem())
		v.Set(m)
	default:
		t.Fatalf("setNonZero: unhandled kind %s", v.Kind())
	}
}
