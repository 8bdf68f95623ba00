// Package rawjson handles JSON without rewriting what it carries. It
// encodes without HTML escaping (encoding/json's Marshal would turn '<',
// '>' and '&' into escapes), so raw upstream payloads embedded in a message
// keep every byte; it reads an object's members as the bytes they arrived
// as, in one validating pass, for the few members a message is routed by;
// it is the one place a peer's object is edited: a member changed,
// added or dropped, every other byte left as it came; and it builds the
// objects and arrays that embed a peer's raw values, each checked to be
// one JSON value before it is written.
package rawjson
