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
// spoken to) must make sameRuntime false, so a reload restarts them; the others are
// applied by re-planning the catalog, or to the running pool (poolChanges). A field
// added to Server fails here until it is put on one side or the other.
func TestSameRuntimeCoversEveryField(t *testing.T) {
	replanned := map[string]bool{ // applied without a restart
		"ID": true, "File": true, "Line": true, "Hash": true, "Required": true, "RequestTimeout": true,
		"Tools": true, "Resources": true, "Prompts": true, "Transforms": true, "LeaseReminder": true,
		// Only how the pool hands out and watches instances (poolChanges).
		"Lease": true, "PingInterval": true,
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

// TestPoolChangesCoverEveryField changes each field of config.Lease, and
// ping_interval, in turn: each is a setting of the running pool, and a reload
// that changes it must say so.
func TestPoolChangesCoverEveryField(t *testing.T) {
	base := config.Server{ID: "s", Transport: config.TransportStdio, Command: "x"}
	assert.Empty(t, poolChanges(&base, &base))
	typ := reflect.TypeOf(base.Lease)
	for i := range typ.NumField() {
		changed := base
		setSomething(t, reflect.ValueOf(&changed.Lease).Elem().Field(i))
		got := poolChanges(&base, &changed)
		if assert.Len(t, got, 1, "changing lease field %s", typ.Field(i).Name) {
			assert.Contains(t, got[0], "lease.", "field %s", typ.Field(i).Name)
		}
		assert.True(t, sameRuntime(&base, &changed), "changing lease field %s restarts the server", typ.Field(i).Name)
		shared := changed
		shared.Stateless, base.Stateless = true, true
		assert.Empty(t, poolChanges(&base, &shared), "a shared server's lease settings change nothing")
		base.Stateless = false
	}
	changed := base
	changed.PingInterval = 5 * time.Second
	assert.Equal(t, []string{"ping_interval 0s -> 5s"}, poolChanges(&base, &changed))
}
