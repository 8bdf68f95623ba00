//go:build race

package integration

// raceEnabled builds the aggregator binary with the race detector when the tests
// themselves run with it, so races in the product fail the test that triggered them.
const raceEnabled = true
