package money_test

import (
	"testing"

	"example.com/invoices/money"
)

func TestHiddenFormat(t *testing.T) {
	cases := map[int64]string{
		0:          "$0.00",
		99:         "$0.99",
		100000000:  "$1,000,000.00",
		-5:         "-$0.05",
		-150:       "-$1.50",
		-100000:    "-$1,000.00",
		-123456:    "-$1,234.56",
		-99999999:  "-$999,999.99",
		1234567890: "$12,345,678.90",
	}
	for in, want := range cases {
		if got := money.Format(in); got != want {
			t.Errorf("Format(%d) = %q, want %q", in, got, want)
		}
	}
}
