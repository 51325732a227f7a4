package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// parseBytes reads sizes like 512m, 4g, 1.5G or 1048576; "" is 0.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult = 1 << 10
	case strings.HasSuffix(s, "m"):
		mult = 1 << 20
	case strings.HasSuffix(s, "g"):
		mult = 1 << 30
	case strings.HasSuffix(s, "t"):
		mult = 1 << 40
	}
	num := strings.TrimRight(s, "kmgtb")
	if strings.HasSuffix(s, "b") && mult == 1 {
		num = strings.TrimSuffix(s, "b")
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a size like 512m or 4g", s)
	}
	return int64(v * float64(mult)), nil
}
