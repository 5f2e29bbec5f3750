// Package money formats amounts of money.
package money

import "fmt"

// Format writes an amount in cents as US dollars: 123456 → "$1,234.56".
func Format(cents int64) string {
	dollars := cents / 100
	rest := cents % 100
	return "$" + group(dollars) + fmt.Sprintf(".%02d", rest)
}

// group writes n with a comma between each group of three digits.
func group(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
