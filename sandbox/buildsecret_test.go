package sandbox

import "testing"

func TestParseBuildSecret(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    BuildSecret
		wantErr bool
	}{
		{in: "id=tok,env=GITHUB_TOKEN", want: BuildSecret{ID: "tok", Env: "GITHUB_TOKEN"}},
		{in: "id=npmrc,src=/home/u/.npmrc", want: BuildSecret{ID: "npmrc", File: "/home/u/.npmrc"}},
		{in: "type=file,id=npmrc,source=n", want: BuildSecret{ID: "npmrc", File: "n"}},
		{in: "id=TOKEN", want: BuildSecret{ID: "TOKEN", Env: "TOKEN"}},
		{in: "env=X", wantErr: true},
		{in: "id=a,env=X,src=f", wantErr: true},
		{in: "id=a,mode=0400", wantErr: true},
		{in: "id=a,env", wantErr: true},
		{in: "id=a,type=ssh", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseBuildSecret(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseBuildSecret(%q) = %+v, %v", tt.in, got, err)
			}
		})
	}
	if _, err := ParseBuildSecrets([]string{"id=a", "id=a,src=f"}); err == nil {
		t.Error("an id given twice is accepted")
	}
}
