package docker

import "testing"

func TestNetworkModeOfEachSetting(t *testing.T) {
	t.Parallel()
	for setting, want := range map[string]string{NetworkAsk: "none", NetworkNone: "none", NetworkOpen: "bridge", "bridge": "bridge"} {
		if got := networkMode(setting); got != want {
			t.Errorf("%s: docker network %q, want %q", setting, got, want)
		}
	}
}
