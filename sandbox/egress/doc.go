// Package egress is the host side of the sandbox's network in ask mode: an
// HTTP proxy (plain requests and CONNECT tunnels) that resolves each host
// itself, decides it by the user's rules (allowed, denied, or asked), dials
// the address it checked, and records every connection with the tool call
// that made it.
package egress
