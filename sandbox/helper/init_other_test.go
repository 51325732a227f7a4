//go:build !linux

package helper

const initTestEnv = "SHIRO_HELPER_TEST_INIT"

func initTestChild(string) int { return 2 }

func serveTestChild(string) int { return 2 }
