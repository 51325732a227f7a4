// Package shiro is the module root of shiro, a terminal coding agent whose
// tools run in a Docker container. The code lives in the packages below;
// this package only holds the tests that keep the architecture honest.
package shiro
