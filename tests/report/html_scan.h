// A small scanner for the step report's HTML (our own output, and Chromium's dump of its DOM):
// the elements with their attributes, checked for balance (every element closed, in order).
// Enough to count the elements that carry a data attribute; not a general HTML parser.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kiln::test {

struct HtmlElement {
  std::string tag;
  std::map<std::string, std::string> attrs;
  bool has(const std::string& a) const { return attrs.count(a) > 0; }
  std::string get(const std::string& a) const {
    auto it = attrs.find(a);
    return it == attrs.end() ? std::string() : it->second;
  }
};

struct HtmlDocument {
  std::vector<HtmlElement> elements;  // in document order
  std::string error;                  // empty when the tags balance
  // The text between the start and end tag of the first element with id `id` (markup kept).
  std::string inner_of_id;
};

inline std::string unescape_html(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    std::string ent = semi == std::string::npos ? "" : s.substr(i + 1, semi - i - 1);
    const std::map<std::string, char> named = {{"amp", '&'},  {"lt", '<'},   {"gt", '>'},
                                               {"quot", '"'}, {"#39", '\''}, {"apos", '\''}};
    auto it = named.find(ent);
    if (it == named.end()) {
      out += s[i];
      continue;
    }
    out += it->second;
    i = semi;
  }
  return out;
}

// Scans `html`; `capture_id`: an element id whose inner text to keep in inner_of_id.
inline HtmlDocument scan_html(const std::string& html, const std::string& capture_id = "") {
  static const std::set<std::string> kVoid = {"meta", "br",   "hr",  "img",    "input", "link",
                                              "area", "base", "col", "source", "wbr"};
  HtmlDocument doc;
  std::vector<std::string> open;
  size_t capture_depth = 0, capture_from = 0;
  bool capturing = false;
  size_t i = 0;
  while (i < html.size()) {
    size_t lt = html.find('<', i);
    if (lt == std::string::npos) break;
    if (html.compare(lt, 4, "<!--") == 0) {
      size_t end = html.find("-->", lt);
      i = end == std::string::npos ? html.size() : end + 3;
      continue;
    }
    if (html.compare(lt, 2, "<!") == 0) {
      i = html.find('>', lt) + 1;
      continue;
    }
    if (html.compare(lt, 2, "</") == 0) {
      size_t gt = html.find('>', lt);
      std::string tag = html.substr(lt + 2, gt - lt - 2);
      for (char& c : tag) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (open.empty() || open.back() != tag) {
        if (doc.error.empty())
          doc.error = "</" + tag + "> closes <" + (open.empty() ? "nothing" : open.back()) +
                      "> at offset " + std::to_string(lt);
      } else {
        if (capturing && capture_depth == open.size()) {
          doc.inner_of_id = html.substr(capture_from, lt - capture_from);
          capturing = false;
        }
        open.pop_back();
      }
      i = gt + 1;
      continue;
    }
    // A start tag: name, then attributes (quoted or bare values).
    size_t p = lt + 1;
    HtmlElement e;
    while (p < html.size() && (std::isalnum(static_cast<unsigned char>(html[p])) || html[p] == '-'))
      e.tag += char(std::tolower(static_cast<unsigned char>(html[p++])));
    bool self_closing = false;
    while (p < html.size() && html[p] != '>') {
      if (std::isspace(static_cast<unsigned char>(html[p]))) {
        ++p;
        continue;
      }
      if (html[p] == '/') {
        self_closing = true;
        ++p;
        continue;
      }
      std::string name;
      while (p < html.size() && !std::isspace(static_cast<unsigned char>(html[p])) &&
             html[p] != '=' && html[p] != '>' && html[p] != '/')
        name += html[p++];
      std::string value;
      if (p < html.size() && html[p] == '=') {
        ++p;
        if (html[p] == '"' || html[p] == '\'') {
          char q = html[p++];
          size_t end = html.find(q, p);
          value = html.substr(p, end - p);
          p = end + 1;
        } else {
          while (p < html.size() && !std::isspace(static_cast<unsigned char>(html[p])) &&
                 html[p] != '>')
            value += html[p++];
        }
      }
      e.attrs[name] = unescape_html(value);
    }
    i = p + 1;
    const std::string tag = e.tag;
    const bool captured = !capture_id.empty() && e.get("id") == capture_id;
    doc.elements.push_back(std::move(e));
    if (self_closing || kVoid.count(tag)) continue;
    open.push_back(tag);
    if (captured) {
      capturing = true;
      capture_depth = open.size();
      capture_from = i;
    }
    if (tag == "script" || tag == "style") {  // raw text up to the end tag
      size_t end = html.find("</" + tag, i);
      if (end == std::string::npos) {
        doc.error = "<" + tag + "> never closed";
        return doc;
      }
      i = end;
    }
  }
  if (doc.error.empty() && !open.empty()) doc.error = "<" + open.back() + "> never closed";
  return doc;
}

// How many elements carry attribute `attr`, per value.
inline std::map<std::string, int> count_by(const HtmlDocument& doc, const std::string& attr) {
  std::map<std::string, int> counts;
  for (const HtmlElement& e : doc.elements)
    if (e.has(attr)) ++counts[e.get(attr)];
  return counts;
}

}  // namespace kiln::test
