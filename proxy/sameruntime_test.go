package proxy

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

// TestSameRuntimeCoversEveryField changes each config.Server field in turn: a field
// that shapes the running instances (how they start, what they see, how they are
// leased) must make sameRuntime false, so a reload restarts them; the others are
// applied by re-planning the catalog. A field added to Server fails here until it is
// put on one side or the other.
func TestSameRuntimeCoversEveryField(t *testing.T) {
	replanned := map[string]bool{ // applied without a restart
		"ID": true, "File": true, "Line": true, "Hash": true, "Required": true, "RequestTimeout": true,
		"Tools": true, "Resources": true, "Prompts": true, "Transforms": true, "LeaseReminder": true,
		// What the environment put into the fields above, and from where; those
		// fields decide.
		"FromEnv": true, "HostVars": true,
	}
	base := config.Server{Transport: config.TransportStdio, Command: "x"}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		changed := base
		setSomething(t, reflect.ValueOf(&changed).Elem().Field(i))
		if replanned[f.Name] {
			assert.True(t, sameRuntime(&base, &changed), "changing %s should not restart the server", f.Name)
		} else {
			assert.False(t, sameRuntime(&base, &changed), "changing %s must restart the server: add it to sameRuntime, or to replanned here", f.Name)
		}
	}
}

// setSomething gives v a value different from its zero value.
func setSomething(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		if v.Type() == reflect.TypeOf(time.Duration(0)) {
			v.SetInt(v.Int() + int64(time.Second))
		} else {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Slice:
		elem := reflect.New(v.Type().Elem()).Elem()
		setSomething(t, elem)
		v.Set(reflect.Append(v, elem))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		setSomething(t, k)
		e := reflect.New(v.Type().Elem()).Elem()
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				setSomething(t, v.Field(i))
				return
			}
		}
	case reflect.Ptr:
		p := reflect.New(v.Type().Elem())
		v.Set(p)
	default:
		t.Fatalf("setSomething: kind %s", v.Kind())
	}
}
