package money

import "testing"

func TestFormat(t *testing.T) {
	cases := map[int64]string{0: "$0.00", 5: "$0.05", 123456: "$1,234.56", 100000: "$1,000.00"}
	for in, want := range cases {
		if got := Format(in); got != want {
			t.Errorf("Format(%d) = %q, want %q", in, got, want)
		}
	}
}
