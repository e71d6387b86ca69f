// Numbers read and printed by the library do not follow the host's locale. A host (unlike
// the CLI) may call setlocale(LC_ALL, "de_DE.UTF-8"); strtod then stops at the '.' of
// "0.5" and streams print "0,5" and "1.920". The test switches this process to a
// comma-decimal locale, generating one with localedef when none is installed.
#include <corridorkey/check.h>
#include <corridorkey/option_fields.h>
#include <corridorkey/profile.h>

#include <catch2/catch.hpp>

#include "config/option_table.h"
#include "model/config.h"
#include "model/json_reader.h"
#include "model/torch_pickle.h"

#include <clocale>
#include <cstdlib>
#include <filesystem>
#include <locale>
#include <string>

using namespace corridorkey;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

/// Sets the C and C++ global locales to a comma-decimal one for its lifetime, then back
/// to "C" (and LOCPATH as it was). Fails the test when no such locale can be had: passing
/// in the "C" locale would prove nothing.
class CommaLocale {
 public:
  CommaLocale() {
    if (const char* p = std::getenv("LOCPATH")) old_locpath_ = p, had_locpath_ = true;
    try {
      enter();
    } catch (...) {  // a failed check: the destructor will not run, so restore here
      restore();
      throw;
    }
  }
  ~CommaLocale() { restore(); }

 private:
  void enter() {
    if (!try_set()) {
      // Not installed (a minimal Debian image has only C / POSIX): build it from glibc's
      // locale sources, once, into a folder this process points LOCPATH at.
      const auto dir = fs::temp_directory_path() / "ck_locale";
      const auto loc = dir / "de_DE.UTF-8";
      if (!fs::exists(loc / "LC_NUMERIC")) {
        fs::create_directories(dir);
        const std::string cmd = "localedef -i de_DE -f UTF-8 '" + loc.string() + "' >/dev/null 2>&1";
        (void)std::system(cmd.c_str());  // exit 1 for mere warnings: the files decide
      }
      ::setenv("LOCPATH", dir.c_str(), 1);
      if (!try_set())
        FAIL("no comma-decimal locale: de_DE.UTF-8 is not installed and `localedef -i de_DE "
             "-f UTF-8 " << loc.string() << "` did not make one (install the locales package "
             "or glibc's locale sources)");
    }
    // The switch really happened, in both worlds the library could be reading from.
    REQUIRE(std::string(std::localeconv()->decimal_point) == ",");
    REQUIRE(std::use_facet<std::numpunct<char>>(std::locale()).decimal_point() == ',');
    REQUIRE(std::strtod("0.5", nullptr) == 0.0);  // what the old parsers did
  }
  void restore() {
    std::locale::global(std::locale::classic());
    std::setlocale(LC_ALL, "C");
    if (had_locpath_) ::setenv("LOCPATH", old_locpath_.c_str(), 1);
    else ::unsetenv("LOCPATH");
  }
  static bool try_set() {
    for (const char* name : {"de_DE.UTF-8", "de_DE.utf8"}) {
      if (!std::setlocale(LC_ALL, name)) continue;
      try {
        std::locale::global(std::locale(name));
        return true;
      } catch (const std::runtime_error&) {
        std::setlocale(LC_ALL, "C");
      }
    }
    return false;
  }
  std::string old_locpath_;
  bool had_locpath_ = false;
};

}  // namespace

TEST_CASE("numbers parse and print the same in a comma-decimal locale", "[unit]") {
  CommaLocale de;

  SECTION("option fields (flags), YAML profiles, and printing them back") {
    Profile o;
    set_option(o, "despill", "0.5", "--despill");  // 0..10 on the flag, 0..1 inside
    CHECK(o.engine.despill_strength == Approx(0.05).epsilon(1e-12));  // strtod in de_DE: 0
    set_option(o, "refiner_scale", "0.75", "--refiner-scale");
    CHECK(o.engine.refiner_scale == 0.75);
    set_option(o, "refiner_scale", "+1.25", "--refiner-scale");  // strtod took a '+'
    CHECK(o.engine.refiner_scale == 1.25);
    CHECK_THROWS_AS(set_option(o, "despill", "0,5", "--despill"), ConfigError);
    CHECK(option_value(o, "despill") == "0.5");
    set_option(o, "edge_threshold_low", "0.125", "--edge-threshold-low", OptionScope::Profile);
    CHECK(o.model.edge_threshold_low == 0.125);

    Profile y;
    apply_profile_yaml(y, "edge_threshold_low: 0.25\nedge_threshold_high: 0.75\ntile_size: 1024\n",
                       "host.yaml");
    CHECK(y.model.edge_threshold_low == 0.25);
    CHECK(y.model.edge_threshold_high == 0.75);
    CHECK(y.engine.tile_size == 1024);

    set_option(y, "despill", "0.5", "--despill");
    const auto text = to_yaml(y);
    CHECK_THAT(text, Contains("edge_threshold_low: 0.25"));
    CHECK_THAT(text, Contains("despill: 0.5"));
    CHECK_THAT(text, Contains("tile_size: 1024"));
    CHECK(text.find("0,25") == std::string::npos);
    CHECK(text.find("1.024") == std::string::npos);
  }

  SECTION("the shared parsers and printers") {
    double d = 0;
    REQUIRE(config::parse_real("0.5", d));
    CHECK(d == 0.5);
    REQUIRE(config::parse_real("1e-3", d));
    CHECK(d == 1e-3);
    CHECK_FALSE(config::parse_real("nan", d));
    CHECK_FALSE(config::parse_real("0.5x", d));
    long long i = 0;
    REQUIRE(config::parse_int("1920", i));
    CHECK(i == 1920);
    REQUIRE(config::parse_int("-3", i));
    CHECK(i == -3);
    CHECK_FALSE(config::parse_int("99999999999999999999", i));
    CHECK(config::format_real(0.5) == "0.5");
    CHECK(config::format_real(1234.5) == "1234.5");
    // Error messages: CK_CHECK's parts, as a host would log them.
    CHECK(errors_detail::str_cat("value ", 0.5, " of ", 1920) == "value 0.5 of 1920");
  }

  SECTION("config.json and the unpickler's FLOAT") {
    const auto v = model::json::parse(R"({"ratio": 0.5, "size": 1920, "big": 2.5e3})", "mem");
    CHECK(v.find("ratio")->f == 0.5);
    CHECK(v.find("size")->i == 1920);
    CHECK(v.find("big")->f == 2500.0);

    auto c = model::GreenFormerConfig::tiny(160);
    c.encoder.mlp_ratio = 2.5;
    const auto json = c.to_json();
    CHECK_THAT(json, Contains("\"mlp_ratio\": 2.5"));
    CHECK(model::GreenFormerConfig::from_json(json, "mem").encoder.mlp_ratio == 2.5);

    const std::string pk = "F0.5\n.";  // protocol 0: FLOAT 0.5, STOP
    model::pickle::UnpickleOptions opt;
    opt.what = "mem";
    opt.load_storage = [](const std::string&, c10::ScalarType, uint64_t) -> c10::Storage {
      throw std::runtime_error("no storage in this pickle");
    };
    const auto p = model::pickle::unpickle(pk.data(), pk.size(), opt);
    CHECK(p.root().f == 0.5);
  }
}

TEST_CASE("the comma-decimal locale test leaves the process in the C locale", "[unit]") {
  { CommaLocale de; }
  CHECK(std::string(std::setlocale(LC_ALL, nullptr)) == "C");
  CHECK(std::locale().name() == "C");
  CHECK(std::strtod("0.5", nullptr) == 0.5);
}
