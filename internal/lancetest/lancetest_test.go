package lancetest

import "testing"

func TestOracleRuns(t *testing.T) {
	var v struct {
		LanceDB    string `json:"lancedb"`
		HasConnect bool   `json:"hasConnect"`
	}
	Node(t, "version.cjs", nil, &v)
	if v.LanceDB != LanceDBVersion || !v.HasConnect {
		t.Fatalf("oracle: %+v", v)
	}
}
