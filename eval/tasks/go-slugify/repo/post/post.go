// Package post holds the blog's posts.
package post

import (
	"net/url"
	"time"
)

// Post is one article of the blog.
type Post struct {
	Title     string
	Body      string
	Published time.Time
}

// URL is where the post is served.
func (p Post) URL() string {
	return "/posts/" + url.PathEscape(p.Title)
}

// Year is the year the post was published.
func (p Post) Year() int { return p.Published.Year() }
