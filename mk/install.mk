# mk/install.mk: the shared libraries and `make install` / `make uninstall`
# (the Makefile includes this file).
#
#   make shared                      build/libattograd.so, build/libattograd64.so
#   make install [PREFIX=/usr/local] [DESTDIR=]
#   make uninstall [PREFIX=...] [DESTDIR=...]   removes exactly what install put
#
# install puts the headers (include/attograd*.h) in $(PREFIX)/include; the
# static and shared libraries, float and double, in $(PREFIX)/lib; and
# attograd.pc (float) and attograd64.pc (double: -DAG_DOUBLE) in
# $(PREFIX)/lib/pkgconfig, so that a program builds with
#   cc prog.c $(pkg-config --cflags --libs attograd)
# The shared libraries are built from objects of their own, compiled with
# -fPIC: the static ones stay as they were.

AG_VERSION   := 0.1.0
AG_SOVERSION := 0
PREFIX       ?= /usr/local
INCLUDEDIR   ?= $(PREFIX)/include
LIBDIR       ?= $(PREFIX)/lib
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALL      ?= install

SO32 := $(BUILD)/libattograd.so
SO64 := $(BUILD)/libattograd64.so
PIC32 := $(LIB_SRC:%.c=$(BUILD)/pic32/%.o)
PIC64 := $(LIB_SRC:%.c=$(BUILD)/pic64/%.o)
AG_HEADERS := $(notdir $(wildcard include/attograd*.h))

.PHONY: shared install uninstall
shared: $(SO32) $(SO64)

$(BUILD)/pic32/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(AG_FLAGS) -fPIC $(CFLAGS) -c $< -o $@
$(BUILD)/pic64/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(AG_FLAGS) -fPIC -DAG_DOUBLE $(CFLAGS) -c $< -o $@

# libattograd.so carries the soname libattograd.so.0 and exports the public
# ag_ names only (mk/attograd.map); the link beside it lets a program linked
# against build/ run with LD_LIBRARY_PATH=build.
define ag_shared
	$(CC) -shared $(CFLAGS) $(LDFLAGS) -Wl,-soname,$(notdir $@).$(AG_SOVERSION) \
	  -Wl,--version-script=mk/attograd.map $(filter %.o,$^) -o $@ $(LDLIBS)
	ln -sf $(notdir $@) $@.$(AG_SOVERSION)
endef
$(SO32): $(PIC32) mk/attograd.map
	$(ag_shared)
$(SO64): $(PIC64) mk/attograd.map
	$(ag_shared)

# attograd.pc and attograd64.pc for the PREFIX given to this make (written
# at every run, so that they never keep another PREFIX).
.PHONY: $(BUILD)/attograd.pc $(BUILD)/attograd64.pc
define ag_pc # name, description, extra cflags
	@mkdir -p $(BUILD)
	@printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$(INCLUDEDIR)' 'libdir=$(LIBDIR)' '' \
	  'Name: $(1)' 'Description: $(2)' 'Version: $(AG_VERSION)' \
	  'Cflags: -I$${includedir}$(3)' 'Libs: -L$${libdir} -l$(1)' 'Libs.private: -fopenmp -lm' > $@
endef
$(BUILD)/attograd.pc:
	$(call ag_pc,attograd,tensors and reverse-mode autodiff in C11 (float),)
$(BUILD)/attograd64.pc:
	$(call ag_pc,attograd64,tensors and reverse-mode autodiff in C11 (double), -DAG_DOUBLE)

install: $(LIB32) $(LIB64) $(SO32) $(SO64) $(BUILD)/attograd.pc $(BUILD)/attograd64.pc
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR)
	$(INSTALL) -m 644 $(AG_HEADERS:%=include/%) $(DESTDIR)$(INCLUDEDIR)
	$(INSTALL) -m 644 $(LIB32) $(LIB64) $(DESTDIR)$(LIBDIR)
	@set -e; for l in attograd attograd64; do \
	  $(INSTALL) -m 755 $(BUILD)/lib$$l.so $(DESTDIR)$(LIBDIR)/lib$$l.so.$(AG_VERSION); \
	  ln -sf lib$$l.so.$(AG_VERSION) $(DESTDIR)$(LIBDIR)/lib$$l.so.$(AG_SOVERSION); \
	  ln -sf lib$$l.so.$(AG_SOVERSION) $(DESTDIR)$(LIBDIR)/lib$$l.so; \
	  echo "installed lib$$l.so.$(AG_VERSION) (and its links) in $(DESTDIR)$(LIBDIR)"; \
	done
	$(INSTALL) -m 644 $(BUILD)/attograd.pc $(BUILD)/attograd64.pc $(DESTDIR)$(PKGCONFIGDIR)

uninstall:
	rm -f $(AG_HEADERS:%=$(DESTDIR)$(INCLUDEDIR)/%)
	rm -f $(foreach l,attograd attograd64,$(DESTDIR)$(LIBDIR)/lib$(l).a \
	  $(DESTDIR)$(LIBDIR)/lib$(l).so $(DESTDIR)$(LIBDIR)/lib$(l).so.$(AG_SOVERSION) \
	  $(DESTDIR)$(LIBDIR)/lib$(l).so.$(AG_VERSION) $(DESTDIR)$(PKGCONFIGDIR)/$(l).pc)

-include $(PIC32:.o=.d) $(PIC64:.o=.d)
