// Package browser opens a URL in the user's browser, through the opener the
// system provides (xdg-open, open, or Windows' URL handler), for the login
// that sends the user to an authorization server. It never waits for the
// browser: a failure to open one only means the user opens the printed URL
// by hand.
package browser
