package agent

import (
	"net/url"

	"github.com/undosh/undosh/hostlink"
)

// Address is the sandbox host's URL: env ($UNDOSH_HOST) when set, else
// configured (the policy's host.address); "" when neither names one, or
// when the one that counts says "none".
func Address(env, configured string) string {
	u := env
	if u == "" {
		u = configured
	}
	if u == "none" {
		return ""
	}
	return u
}

// Client returns a client of the host at rawURL for the VM whose state
// directory is stateDir (undosh and undoctl alike). Unless rawURL carries
// a token of its own, the client's token is the current generation's
// from the host's last WHO_YOU_ARE, in host.json, which the client reads
// again before every attempt and while it waits
// ([hostlink.ClientOptions.Identity]): a VM that becomes the sandbox
// while a call is in flight (a promoted copy, a restore) goes on with the
// new token as soon as the agent has kept it.
func Client(rawURL, stateDir string, opts hostlink.ClientOptions) (*hostlink.Client, error) {
	if stateDir != "" && !hasToken(rawURL) {
		opts.Identity = func() (hostlink.WhoYouAre, bool) { return Read(stateDir) }
	}
	return hostlink.NewClient(rawURL, opts)
}

// hasToken reports whether rawURL names its own token.
func hasToken(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Query().Has("token")
}
