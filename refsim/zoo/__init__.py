"""The zoo: faulty hosts (`faulty`), correct hosts (`correct`), and the campaigns over them,
the kill and pass matrices (`matrices`) and the falsifiability table (`falsify`)."""
